package forgehttp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// MAC returns the HMAC-SHA256 of body keyed with secret (32 bytes): what Forgejo and Gitea sign
// a webhook payload with (Gitea services/webhook/deliver.go). A verifier compares it with the
// decoded header value using hmac.Equal.
func MAC(secret, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return mac.Sum(nil)
}

// Sign returns MAC(secret, body) as lowercase hex without a prefix: the value Forgejo and Gitea
// put in X-Forgejo-Signature and X-Gitea-Signature (X-Hub-Signature-256 carries it after
// "sha256=").
func Sign(secret string, body []byte) string {
	return hex.EncodeToString(MAC([]byte(secret), body))
}
