package wire

// The widths of a collection's count prefix, as Reader.Count and AppendCount take them.
const (
	Count16 = 2 // a u16 count
	Count32 = 4 // a u32 count
)
