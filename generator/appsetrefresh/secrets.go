package appsetrefresh

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// watchedKeys are the data keys of a cluster Secret that decide whether an
// Application may target the cluster (Argo CD finds the destination by
// server or name, and checks the project).
var watchedKeys = []string{"name", "server", "project"}

// watchSecrets signals wake when a cluster Secret selected by the
// configuration is created or deleted, or its name, server or project
// changes (not for the Secrets already there when the watch starts, nor for
// the prune countdown annotations). The returned function stops the watch
// and waits for it.
func (t *Trigger) watchSecrets(ctx context.Context, wake chan<- struct{}) func() {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(t.kube, 0,
		informers.WithNamespace(t.cfg.SecretsNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = t.cfg.SecretsSelector }))
	inf := factory.Core().V1().Secrets().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				signal()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if secretChanged(oldObj, newObj) {
				signal()
			}
		},
		DeleteFunc: func(any) { signal() },
	})
	if err != nil { // only when the informer has already stopped
		t.logger.Error("cannot watch cluster Secrets; refreshing on inventory changes only", "error", err.Error())
	}
	wctx, cancel := context.WithCancel(ctx)
	factory.Start(wctx.Done())
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		// not waiting for the sync is fine: events of the initial list are
		// ignored either way; this only reports a watch that cannot start
		sctx, scancel := context.WithTimeout(wctx, time.Minute)
		defer scancel()
		if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) && wctx.Err() == nil {
			t.logger.Warn("cluster Secret watch not synced after 1m; refreshing on inventory changes meanwhile",
				"namespace", t.cfg.SecretsNamespace)
		}
	}()
	return func() {
		cancel()
		factory.Shutdown()
		<-synced
	}
}

func secretChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*corev1.Secret)
	n, ok2 := newObj.(*corev1.Secret)
	if !ok1 || !ok2 {
		return true
	}
	for _, k := range watchedKeys {
		if string(o.Data[k]) != string(n.Data[k]) {
			return true
		}
	}
	return false
}
