package inventory_test

import (
	"sync"
	"testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

func TestMemoryLedgerContract(t *testing.T) {
	var mu sync.Mutex
	stores := map[string]*inventory.Memory{}
	ledgertest.Run(t, func(_ *testing.T, key string) ledgertest.Ledger {
		mu.Lock()
		defer mu.Unlock()
		if stores[key] == nil {
			stores[key] = inventory.NewMemory()
		}
		return stores[key]
	})
}
