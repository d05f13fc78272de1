package pi

// SetContract makes the backend configure its extension with another
// contract version, as a binary built apart from its extension would.
func (b *Backend) SetContract(v int) { b.contract = v }
