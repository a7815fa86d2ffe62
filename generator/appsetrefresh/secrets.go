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
			if _, ok := secretOf(obj); !ok || t.selected(obj) {
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

// secretView is what the trigger reads of a cluster Secret in the
// shared informer's cache: a *corev1.Secret, or the compact record the
// reconciler's cache transform keeps of it (clustersecret.Record).
type secretView interface {
	GetLabels() map[string]string
	// Value returns the data value of key, "" if absent; the record keeps
	// those of watchedKeys.
	Value(key string) string
}

// fullSecret reads a *corev1.Secret as a secretView.
type fullSecret struct{ *corev1.Secret }

func (s fullSecret) Value(key string) string { return string(s.Data[key]) }

// secretOf returns obj as a secretView, if it is one.
func secretOf(obj any) (secretView, bool) {
	switch o := obj.(type) {
	case *corev1.Secret:
		return fullSecret{o}, true
	case secretView:
		return o, true
	}
	return nil, false
}

// selected reports whether obj is a Secret that SecretsSelector selects.
func (t *Trigger) selected(obj any) bool {
	s, ok := secretOf(obj)
	return ok && t.owned.Matches(labels.Set(s.GetLabels()))
}

func secretChanged(oldObj, newObj any) bool {
	o, ok1 := secretOf(oldObj)
	n, ok2 := secretOf(newObj)
	if !ok1 || !ok2 {
		return true
	}
	for _, k := range watchedKeys {
		if o.Value(k) != n.Value(k) {
			return true
		}
	}
	return false
}
