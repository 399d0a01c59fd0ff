package fila

// lifeDone is closed when the Cluster closes: the lease keep-alive of a node connection whose node
// is gone goes on through the Cluster until then (leaseTable.outlive).
func (c *Cluster) lifeDone() <-chan struct{} { return c.life.Done() }
