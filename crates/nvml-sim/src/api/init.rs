//! Init, shutdown and error strings: the calls that work before init.

use std::ffi::{c_char, c_uint};
use std::time::Instant;

use crate::call;
use crate::code::{self, SUCCESS, nvmlReturn_t};
use crate::{cost, state, timing};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init("nvmlInit_v2")
}

/// Flags only matter to drivers with real GPUs to attach, so they are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init("nvmlInitWithFlags")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    cost::enter("nvmlShutdown");
    timing::sleep_delay();
    call::guarded(|| state::lock().shutdown("nvmlShutdown"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let started = Instant::now();
    let text = code::describe(result).as_ptr();
    timing::add_busy(started);
    text
}

fn init(function: &str) -> nvmlReturn_t {
    let begun = cost::Begun::now();
    let rc = call::guarded(|| state::lock().init(function));
    // After the scenario has said whether calls cost what a driver's do;
    // the time spent reading it counts towards init's cost.
    cost::enter_from(function, Some(begun));
    if timing::init_hangs() {
        timing::hang();
    }
    // Init is where a driver without persistence mode is slowest, so it
    // pays the delay too, once the scenario saying how long is loaded.
    if rc == SUCCESS {
        timing::sleep_delay();
    }
    rc
}
