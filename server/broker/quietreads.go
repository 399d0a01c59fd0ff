package broker

// Reads that change nothing — a /metrics scrape's figures, a queue's stats, counts, fairness
// keys, a description — run on an awake group's actor like any operation, but they are not
// activity: a group that only answers them still hibernates once it has had no other request for
// queue_idle_timeout. Otherwise a scrape interval below the idle timeout would keep every group
// awake. A sleeping group answers them from its summary without waking (asleep).

// read runs f on the actor while this node leads the group, as call does, and waits for it,
// without counting as a request for the group's idle time. It returns false when the actor
// does not lead or has stopped. f must only read.
func (a *actor) read(f func(a *actor)) bool {
	ch := make(chan bool, 1)
	a.post(func(a *actor) {
		a.reads++
		if !a.leading {
			ch <- false // a follower holds no state to read (roles.go)
			return
		}
		f(a)
		ch <- true
	})
	select {
	case ok := <-ch:
		return ok
	case <-a.done:
		return false
	}
}
