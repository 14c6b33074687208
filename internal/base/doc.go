// Package base is the ground floor of Alfred's house: the leaf packages under it (censor,
// textwalk, httpserve, cost, pgtest, servetest, runfile, markdown) import nothing of Alfred's (pgtest: the embedded
// migrations, a leaf too) and may be imported from anywhere. Above it, webhook, mailbox and runner import only the ground floor of internal/;
// the operator's side (internal/config, web, admin, doctor, metrics, demo) and the store
// (internal/store) are imported only by cmd/ (spec/architecture.md, "Imports go one way";
// imports_test.go holds the rules against the module's import graph).
package base
