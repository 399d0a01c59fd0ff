package throttle

import "slices"

// Names lists the throttles live subscriptions declare, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	names := make([]string, 0, len(r.throttles))
	for n := range r.throttles {
		names = append(names, n)
	}
	r.mu.Unlock()
	slices.Sort(names)
	return names
}
