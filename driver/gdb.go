package driver

import (
	"errors"
	"fmt"

	"github.com/snapctl/snapctl/driver/mi"
)

// insertError is the error of inserting st's breakpoint into the running
// target: gdb's refusal is the plan's (exit 3, at the location's line);
// anything else, such as gdb dying meanwhile, is not.
func insertError(st *bpState, err error) error {
	var me *mi.Error
	if errors.As(err, &me) {
		return st.bp.LocationError("gdb cannot insert %q in the running target: %s", st.bp.Location, me.Msg)
	}
	return fmt.Errorf("inserting breakpoint %q: %w", st.bp.Name, err)
}
