package sources

import (
	"context"
	"time"
)

// Hinter is implemented by a source whose upstream pushes changes (Rancher's
// /v3/subscribe): between listings, it tells the inventory that the
// upstream may have changed, and the inventory lists the source sooner.
// A hint never changes the inventory by itself: the listing stays the only
// truth, and every lifecycle rule applies to what it returns.
type Hinter interface {
	// Hints runs until ctx is cancelled, calling hint whenever the
	// upstream may have changed (an event, a reconnect). hint never
	// blocks. Only the leader runs it.
	Hints(ctx context.Context, hint func())
	// HintStatus reports how the hints are doing, for /status.
	HintStatus() HintStatus
}

// HintStatus is what /status shows of a source's hints.
type HintStatus struct {
	// Enabled: the source is configured to receive hints.
	Enabled bool `json:"enabled"`
	// Connected: its stream is open now.
	Connected bool `json:"connected"`
	// Disabled says why the stream was turned off for good (the upstream
	// does not serve it); the periodic listing goes on.
	Disabled string `json:"disabled,omitempty"`
	// LastEvent is when the last change was received, LastConnect when
	// the stream last opened.
	LastEvent   time.Time `json:"lastEvent,omitzero"`
	LastConnect time.Time `json:"lastConnect,omitzero"`
	// Reconnects counts the streams opened after the first.
	Reconnects int `json:"reconnects"`
	// LastError is the last failure to open or keep the stream.
	LastError string `json:"lastError,omitempty"`
}
