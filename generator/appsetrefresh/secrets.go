package appsetrefresh

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// watchedKeys are the data keys of a cluster Secret that decide whether an
// Application may target the cluster (Argo CD finds the destination by
// server or name, and checks the project).
var watchedKeys = []string{"name", "server", "project"}

// watchSecrets signals wake when a cluster Secret selected by the
// configuration is created or deleted, or its name, server or project
// changes (not for the Secrets already in the cache when the watch starts,
// nor for the prune countdown annotations). It listens to the shared
// informer of cluster Secrets; the returned function stops listening.
func (t *Trigger) watchSecrets(wake chan<- struct{}) func() {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	inf := t.caches.Secrets
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial && t.selected(obj) {
				signal()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if (t.selected(oldObj) || t.selected(newObj)) && secretChanged(oldObj, newObj) {
				signal()
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if _, ok := obj.(*corev1.Secret); !ok || t.selected(obj) {
				signal() // a Secret whose last state is unknown may have been ours
			}
		},
	})
	if err != nil { // only when the informer has already stopped
		t.logger.Error("cannot watch cluster Secrets; refreshing on inventory changes only", "error", err.Error())
		return func() {}
	}
	return func() {
		if err := inf.RemoveEventHandler(reg); err != nil {
			t.logger.Debug("stop watching cluster Secrets", "error", err.Error())
		}
	}
}

// selected reports whether obj is a Secret that SecretsSelector selects.
func (t *Trigger) selected(obj any) bool {
	s, ok := obj.(*corev1.Secret)
	return ok && t.owned.Matches(labels.Set(s.Labels))
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
