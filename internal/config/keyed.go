package config

import "net/url"

// KeyedSecret is one configured secret and the configuration key that sets it.
type KeyedSecret struct {
	// Key names the secret without revealing it: the configuration key ("agents[0].api_key",
	// "forges[1].token", "database_url"), or "the database password" for the password of a
	// URL-shaped database_url.
	Key string
	// Value is the secret; it prints as [Redacted].
	Value Secret
}

// KeyedSecrets returns every non-empty secret of Secrets with its key, in the order of the
// configuration: for a refusal that must say which secret it found without showing it.
func (c *Config) KeyedSecrets() []KeyedSecret {
	var out []KeyedSecret
	for _, r := range c.secretRefs() {
		if *r.val != "" {
			out = append(out, KeyedSecret{Key: r.key, Value: *r.val})
		}
	}
	if u := c.databaseUser(); u != nil {
		if pw, ok := u.Password(); ok && pw != "" {
			out = append(out, KeyedSecret{Key: keyDatabasePassword, Value: Secret(pw)})
		}
	}
	return out
}

// keyDatabasePassword is the Key of the password of a URL-shaped database_url.
const keyDatabasePassword = "the database password"

// databaseUser is the user information of a URL-shaped database_url, nil when it has none.
func (c *Config) databaseUser() *url.Userinfo {
	if u, err := url.Parse(c.DatabaseURL.Reveal()); err == nil {
		return u.User
	}
	return nil
}
