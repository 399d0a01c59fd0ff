package emit

import "testing"

// Doc sentences start with the name they document and read as English whatever form the spec's
// prose takes: a noun phrase, a clause, a question word, or anything else.
func TestSentence(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"The queue name.", "X is the queue name."},
		{"A keyed bucket, or the single bucket of an unkeyed throttle.", "X is a keyed bucket, or the single bucket of an unkeyed throttle."},
		{"The node is up.", "X means the node is up."},
		{"A lease is committed in the queue's Raft log before the Delivery frame is sent.", "X means a lease is committed in the queue's Raft log before the Delivery frame is sent."},
		{"The QUIC application error code with which a connection is closed.", "X is the QUIC application error code with which a connection is closed."},
		{"The fairness key; name is empty.", "X is the fairness key; name is empty."},
		{"How the queue orders its messages.", "X says how the queue orders its messages."},
		{"FIBP ordering: 0 none.", "X: FIBP ordering: 0 none."},
		{"The ACL of the key.", "X is the ACL of the key."},
	} {
		if got := sentence("X", tc.doc); got != tc.want {
			t.Errorf("sentence(%q)\n got %q\nwant %q", tc.doc, got, tc.want)
		}
	}
}
