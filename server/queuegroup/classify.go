package queuegroup

import (
	"fmt"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/engine"
)

// Classification converts a log record to the engine's.
func Classification(c *queuelog.Classification) engine.Classification {
	return engine.Classification{FairnessKey: c.FairnessKey, Weight: c.Weight, NotBefore: c.NotBefore,
		Attributes: attributes(c.Attributes), Grouped: c.Grouped, Group: string(c.Group)}
}

// Reclassify applies the outcomes of running on_enqueue again on parked messages of the queue
// lane at time at (see the Reclassify command) and returns the messages it dead-lettered, as they
// now stand in the dead-letter lane. The items must be parked messages of the queue lane.
func (s *State) Reclassify(at int64, items []queuelog.Reclassified) ([]engine.Message, error) {
	q, d := s.lanes[LaneQueue], s.lanes[LaneDeadLetter]
	var dead []engine.Message
	for i := range items {
		it := &items[i]
		id := engine.MsgID(it.ID)
		var err error
		switch it.Outcome {
		case queuelog.OutcomeClassified:
			err = q.ApplyClassify(engine.Classify{ID: id, At: at, Class: Classification(&it.Class)})
		case queuelog.OutcomeFailed:
			_, err = q.ApplyClassifyFailed(engine.ClassifyFailed{ID: id})
		case queuelog.OutcomeDeadLetter:
			var m engine.Message
			if m, err = q.ApplyRemove(engine.Remove{ID: id, At: at}); err == nil {
				m.Queue, m.LastError = "", it.Error
				err = d.ApplyEnqueue(engine.Enqueue{At: at, Msgs: []engine.Message{m}})
				dead = append(dead, m)
				s.keepWhy(id, DeadLetter{Reason: ReasonUnclassified, Error: it.Error, Attempts: m.Attempts, At: at})
			}
		default:
			err = fmt.Errorf("outcome %v is not one of a reclassification", it.Outcome)
		}
		if err != nil {
			return dead, fmt.Errorf("reclassify %v: %w", id, err)
		}
	}
	if len(items) > 0 {
		s.record(&queuelog.Reclassify{At: at, Items: items})
	}
	return dead, nil
}

// RedriveClassified moves messages of the dead-letter lane back to the queue lane at time at, in
// the order given, each as its outcome says (see the RedriveClassified command); it skips IDs
// that are not stored there and returns how many moved.
func (s *State) RedriveClassified(at int64, items []queuelog.Redriven) (int, error) {
	c := queuelog.RedriveClassified{At: at, Items: make([]queuelog.Redriven, 0, len(items))}
	d, q := s.lanes[LaneDeadLetter], s.lanes[LaneQueue]
	for i := range items {
		it := &items[i]
		id := engine.MsgID(it.ID)
		m, err := d.ApplyRemove(engine.Remove{ID: id, At: at})
		if err != nil {
			continue
		}
		s.forgetWhy(id)
		m = engine.RedriveCopy(m)
		switch it.Outcome {
		case queuelog.OutcomeKeep:
		case queuelog.OutcomeClassified:
			cl := Classification(&it.Class)
			m.FairnessKey, m.Weight, m.NotBefore, m.Attributes = cl.FairnessKey, cl.Weight, cl.NotBefore, cl.Attributes
			m.Grouped, m.Group = cl.Grouped, cl.Group
			m.Unclassified, m.ClassifyTries = false, 0
		case queuelog.OutcomePark:
			m.Grouped, m.Group = false, ""
			m.Unclassified, m.ClassifyTries = true, 0
		default:
			return len(c.Items), fmt.Errorf("redrive %v: outcome %v is not one of a redrive", id, it.Outcome)
		}
		if err := q.ApplyEnqueue(engine.Enqueue{At: at, Msgs: []engine.Message{m}}); err != nil {
			return len(c.Items), fmt.Errorf("redrive %v: %w", id, err)
		}
		c.Items = append(c.Items, *it)
	}
	if len(c.Items) > 0 {
		s.record(&c)
	}
	return len(c.Items), nil
}
