// Package forgetest holds the test doubles of the forge seam and helpers for webhook tests:
//
//   - model.go: the in-memory forge state that the Fake and both stand-ins share;
//   - seed.go: the Seeder methods that create and read back repositories, issues, users,
//     labels, merge requests and CI runs;
//   - fake.go: Fake, a recording in-memory forge.Forge;
//   - gitlab_server.go, forgejo_server.go, server.go: httptest stand-ins of the GitLab v4 and
//     Forgejo v1 APIs for the real clients;
//   - conformance.go: RunConformance, the suite every forge.Forge passes;
//   - sign.go, fixtures.go: webhook requests built as each forge sends them, and FixtureDir,
//     where the recorded deliveries are (read them with the recorded subpackage);
//   - bench.go: BenchParse, a parser's BenchmarkParse (Parse next to decodings of the same body).
package forgetest
