package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"
)

// kubeSide is the real kube-apiserver of a -secrets run, with the watches
// that time the cold start and the configuration section pointing at it.
type kubeSide struct {
	kube            *kubeEnv
	secrets, ledger *seenWatch
	// extra is the cold start's configuration section (every setting at
	// the binary's default), steadyExtra the steady-state window's (with
	// -resync)
	extra, steadyExtra string
}

func startKubeSide(ctx context.Context, o options, n int, dir string, log io.Writer) (*kubeSide, error) {
	fmt.Fprintf(log, "loadgen: %d clusters: starting kube-apiserver and etcd\n", n)
	kube, err := startKube(ctx, o.kubeAssets, dir)
	if err != nil {
		return nil, err
	}
	ks := &kubeSide{kube: kube}
	ks.extra, ks.steadyExtra = configSections(kube.kubeconfig, o.resync)
	if ks.secrets, err = kube.watchSecrets(ctx); err == nil {
		ks.ledger, err = kube.watchLedger(ctx)
	}
	if err != nil {
		ks.stop()
		return nil, err
	}
	return ks, nil
}

// configSections are the service's configuration sections pointing at
// kubeconfig: the cold start's, every setting at the binary's default, and
// the steady state's, with secrets.resync resync.
func configSections(kubeconfig string, resync time.Duration) (cold, steady string) {
	return kubeConfigSection(kubeconfig, 0), kubeConfigSection(kubeconfig, resync)
}

func (k *kubeSide) stop() {
	for _, w := range []*seenWatch{k.secrets, k.ledger} {
		if w != nil {
			w.stop()
		}
	}
	k.kube.stop()
}

// waitColdSync waits for the service's n Secrets, seen by sw, and its n
// ClusterProfiles with their status, seen by lw, and returns the cold
// sync's figures: from started to the last of each.
func waitColdSync(o options, n int, sw, lw *seenWatch, svc *service, started time.Time, log io.Writer) (*syncResult, error) {
	last, err := sw.waitFor(n, o.syncTimeout, svc.exited())
	if err != nil {
		return nil, fmt.Errorf("cold sync: %w; log:\n%s", err, svc.logTail())
	}
	sr := &syncResult{Secrets: n, ColdSync: last.Sub(started)}
	fmt.Fprintf(log, "loadgen: %d clusters: %d Secrets written %s after the start\n", n, n, sr.ColdSync.Round(time.Millisecond))
	if last, err = lw.waitFor(n, o.syncTimeout, svc.exited()); err != nil {
		return nil, fmt.Errorf("ledger: %w; log:\n%s", err, svc.logTail())
	}
	sr.Ledger = last.Sub(started)
	fmt.Fprintf(log, "loadgen: %d clusters: %d ClusterProfiles written with their status %s after the start\n", n, n, sr.Ledger.Round(time.Millisecond))
	return sr, nil
}

// restartForSteady stops svc, which made the cold start with every
// setting at the binary's default, and starts the binary again against the
// same apiserver with secrets.resync o.resync, so that the steady state's
// passes come within seconds. It returns once the new process is ready and
// has made its first pass (a new process lists once), stopping it if it
// does not; svc is stopped in any case.
func restartForSteady(ctx context.Context, o options, n int, dir, addr string, ks *kubeSide, svc *service, sr *syncResult, log io.Writer) (*service, string, error) {
	before, err := ks.kube.requestCounts(ctx)
	stopErr := svc.stop(30 * time.Second) // stopped whatever happens next
	switch {
	case err != nil:
		return nil, "", err
	case stopErr != nil:
		return nil, "", stopErr
	}
	cfg, err := writeConfig(filepath.Join(dir, "config-steady.yaml"), addr, ks.steadyExtra)
	if err != nil {
		return nil, "", fmt.Errorf("write the steady state's configuration: %w", err)
	}
	fmt.Fprintf(log, "loadgen: %d clusters: restarting the service with secrets.resync %s for the steady state\n", n, o.resync)
	started := time.Now()
	next, err := startService(o.binary, cfg, addr, svc.log)
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (*service, string, error) {
		_ = next.stop(30 * time.Second)
		return nil, "", err
	}
	if err := next.waitReady(o.readyTimeout); err != nil {
		return fail(err)
	}
	// a new leader makes its first Secret pass and refreshes the
	// ApplicationSets once: the window starts after both
	deadline := time.Now().Add(o.resync + 2*time.Minute)
	for {
		secrets, err := next.serviceCounter(passesTotal, passSucceeded)
		if err != nil {
			return fail(err)
		}
		refreshes, err := next.serviceCounter(refreshPassesTotal, passSucceeded)
		if err != nil {
			return fail(err)
		}
		if secrets >= 1 && refreshes >= 1 {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("steady state: %g Secret passes and %g refresh passes %s after the restart", secrets, refreshes, time.Since(started).Round(time.Second)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, err := ks.kube.requestCounts(ctx)
	if err != nil {
		return fail(err)
	}
	sr.RestartRequests = sumCounts(before, after)
	fmt.Fprintf(log, "loadgen: %d clusters: restarted; its first pass done %s after its start; apiserver requests %v\n",
		n, time.Since(started).Round(time.Millisecond), sr.RestartRequests)
	return next, cfg, nil
}

// steadyState restarts the service for the steady state
// (restartForSteady), checks that the restarted process answers as the
// first did (check), and counts the apiserver's requests over its
// o.steadyPasses passes (steady). It returns the process it leaves
// running and its configuration; on an error every process is stopped.
func steadyState(ctx context.Context, o options, n int, dir, addr string, ks *kubeSide, svc *service, sr *syncResult,
	check func(*service) error, log io.Writer) (*service, string, error) {
	next, cfg, err := restartForSteady(ctx, o, n, dir, addr, ks, svc, sr, log)
	if err != nil {
		return nil, "", err
	}
	if err = check(next); err != nil {
		err = fmt.Errorf("after the restart: %w", err)
	} else {
		time.Sleep(o.settle) // as after the cold start: the reads of the check end
		err = steady(ctx, o, ks.kube, next, sr, log)
	}
	if err != nil {
		_ = next.stop(30 * time.Second)
		return nil, "", err
	}
	return next, cfg, nil
}

// passesTotal counts the Secret writer's passes, by result; passSucceeded
// selects those that succeeded. refreshPassesTotal counts the refresh
// trigger's passes, by result: a failed one is tried again later, maybe in
// the window.
const (
	passesTotal        = "argocd_cluster_discovery_secrets_passes_total"
	refreshPassesTotal = "argocd_cluster_discovery_appset_refresh_passes_total"
)

var passSucceeded = map[string]string{"result": "success"}

// steady counts the apiserver's requests over o.steadyPasses successful
// reconcile passes with nothing to change (the fleet is as written).
func steady(ctx context.Context, o options, kube *kubeEnv, svc *service, sr *syncResult, log io.Writer) error {
	p0, err := svc.serviceCounter(passesTotal, passSucceeded)
	if err != nil {
		return err
	}
	before, err := kube.requestCounts(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	deadline := t0.Add(time.Duration(o.steadyPasses+2)*o.resync + 30*time.Second)
	for {
		p, err := svc.serviceCounter(passesTotal, passSucceeded)
		if err != nil {
			return err
		}
		if p >= p0+float64(o.steadyPasses) {
			sr.SteadyPasses = int(p - p0)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("steady state: %g of %d passes after %s", p-p0, o.steadyPasses, time.Since(t0).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, err := kube.requestCounts(ctx)
	if err != nil {
		return err
	}
	sr.SteadyRequests, sr.SteadyWindow = sumCounts(before, after), time.Since(t0)
	fmt.Fprintf(log, "loadgen: %d passes with nothing to change in %s: apiserver requests %v\n", sr.SteadyPasses, sr.SteadyWindow.Round(time.Millisecond), sr.SteadyRequests)
	return nil
}
