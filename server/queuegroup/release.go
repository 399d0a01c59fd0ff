package queuegroup

// Release gives back the memory both lanes hold from their engine.Allocator (engine.Config.Alloc)
// now, rather than when the State is collected. The broker calls it when it drops the State for
// good (the group hibernated or stopped): nothing may use the State afterwards.
func (s *State) Release() {
	for _, q := range s.lanes {
		q.Release()
	}
}
