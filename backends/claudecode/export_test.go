package claudecode

// SetHookForTest makes the backend's PreToolUse hook run another
// subcommand of the iterion binary.
func SetHookForTest(b *Backend, cmd string) { b.hook = cmd }
