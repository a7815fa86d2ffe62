package clusterprofile

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// saveLog counts the writes of one Save and how long each of its steps
// took, for the line Save logs when it wrote something.
type saveLog struct {
	start                     time.Time
	created, applied, deleted atomic.Int64
	statuses                  atomic.Int64
	sources                   bool
	// objects, deletes and statusesTook are the steps' durations
	objects, deletes, statusesTook time.Duration
}

func newSaveLog() *saveLog { return &saveLog{start: time.Now()} }

// lap returns how long it has been since *since, and sets *since to now.
func lap(since *time.Time) time.Duration {
	now := time.Now()
	d := now.Sub(*since)
	*since = now
	return d
}

// wrote reports whether the save sent any write.
func (s *saveLog) wrote() bool {
	return s.created.Load()+s.applied.Load()+s.deleted.Load()+s.statuses.Load() > 0 || s.sources
}

// log writes the save's line to logger: nothing when nothing was written
// (steady state is silent), a warning when the save failed.
func (s *saveLog) log(ctx context.Context, logger *slog.Logger, records, failed int) {
	if logger == nil || (!s.wrote() && failed == 0) {
		return
	}
	level, msg := slog.LevelInfo, "ledger saved"
	if failed > 0 {
		level, msg = slog.LevelWarn, "ledger saved in part; the next save retries the rest"
	}
	logger.Log(ctx, level, msg, "records", records, "created", s.created.Load(), "applied", s.applied.Load(),
		"deleted", s.deleted.Load(), "statuses", s.statuses.Load(), "sourceRecords", s.sources, "failed", failed,
		"objectsTook", s.objects.Round(time.Millisecond).String(), "deletesTook", s.deletes.Round(time.Millisecond).String(),
		"statusesTook", s.statusesTook.Round(time.Millisecond).String(), "took", time.Since(s.start).Round(time.Millisecond).String())
}
