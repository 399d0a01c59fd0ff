package config

import (
	"errors"
	"time"
)

// Auth holds the settings of API-key authentication other than the bootstrap key (which is
// bootstrap_api_key_file or FILA_BOOTSTRAP_API_KEY).
type Auth struct {
	MaxStalenessMs int `yaml:"max_staleness_ms" help:"a node of a cluster answers requests authenticated by an API key (the bootstrap key excepted) only while it leads the meta group or has heard from its leader within this many milliseconds; otherwise AuthStateStale, and the client tries another node. A revoked key stops working on every node within about this bound. A single node ignores it"`
}

// DefaultAuth is the default of the auth settings.
func DefaultAuth() Auth { return Auth{MaxStalenessMs: 5000} }

// MaxStaleness is max_staleness_ms as a duration.
func (a Auth) MaxStaleness() time.Duration { return time.Duration(a.MaxStalenessMs) * time.Millisecond }

func (a Auth) validate() []error {
	if a.MaxStalenessMs <= 0 {
		return []error{errors.New("auth.max_staleness_ms: must be positive")}
	}
	return nil
}
