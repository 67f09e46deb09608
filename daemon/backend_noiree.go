//go:build !iree || !cgo

package daemon

// ireeBuilt reports whether this binary carries the IREE backend.
const ireeBuilt = false

// openIREE is unreachable through a validated Config (Validate refuses the
// iree backend here); it refuses it again for callers that skip Validate.
func openIREE(cfg Config) (ownedEngine, error) {
	return nil, (&cfg.Engine).validateBackend()
}
