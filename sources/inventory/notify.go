package inventory

type subscriber struct {
	ch chan struct{}
	// listings: told after every successful listing, changed or not.
	listings bool
}

// Subscribe returns a channel that receives a value after the snapshot
// changes. Notifications coalesce: a slow subscriber sees one value for
// several changes and should read Snapshot afterwards. Call cancel to stop.
func (inv *Inventory) Subscribe() (<-chan struct{}, func()) {
	return inv.subscribe(false)
}

// SubscribeListings is Subscribe, also told after every successful listing
// that changed nothing: for consumers that count listings (the Secret
// reconciler's prune countdown).
func (inv *Inventory) SubscribeListings() (<-chan struct{}, func()) {
	return inv.subscribe(true)
}

func (inv *Inventory) subscribe(listings bool) (<-chan struct{}, func()) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	id := inv.nextID
	inv.nextID++
	ch := make(chan struct{}, 1)
	inv.subs[id] = subscriber{ch: ch, listings: listings}
	return ch, func() {
		inv.mu.Lock()
		defer inv.mu.Unlock()
		delete(inv.subs, id)
	}
}

// notify tells the subscribers of a listing: all of them when the snapshot
// changed, those of SubscribeListings also after a complete listing that
// changed nothing. It never blocks. The caller holds inv.mu.
func (inv *Inventory) notify(changed, complete bool) {
	for _, sub := range inv.subs {
		if changed || (sub.listings && complete) {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
	}
}
