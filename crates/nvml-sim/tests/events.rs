//! Driver events and the health readings beside them: event sets, Xid and
//! ECC events delivered while a client waits, the recovery action and
//! NVLink's error totals among the field values.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
};
use support::scenario_test;

const SCENARIO: &str = r#"
driver_version = "570.86.15"

[[gpu]]
uuid = "GPU-00000000-0000-0000-0000-0000000000aa"
recovery_action = "gpu_reset"
recovery_action_from_s = 0.6
nvlink = [{ active = true }, { active = true }]
nvlink_errors_per_s = { replay = 100 }

# Before any client registers: never delivered.
[[gpu.event]]
at_s = 0.0
type = "xid"
xid = 13

[[gpu.event]]
at_s = 0.6
type = "xid"
xid = 79

[[gpu.event]]
at_s = 0.7
type = "ecc_double_bit"

[[gpu]]
unsupported = ["events", "recovery_action"]

[[gpu]]
ecc_enabled = false

[[gpu.event]]
at_s = 0.65
type = "xid"
xid = 999
gpu_instance_id = 3
compute_instance_id = 0
"#;

#[test]
fn events_come_as_they_fall_due_while_a_client_waits() {
    scenario_test("events_come_as_they_fall_due_while_a_client_waits", Some(SCENARIO), |sim| {
        let nvml = sim.nvml().unwrap();
        let (a, b, c) =
            (nvml.device_by_index(0).unwrap(), nvml.device_by_index(1).unwrap(), nvml.device_by_index(2).unwrap());
        let all = EventTypes::CRITICAL_XID_ERROR | EventTypes::SINGLE_BIT_ECC_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR;
        assert!(a.supported_event_types().unwrap().contains(all));
        assert!(b.supported_event_types().unwrap().is_empty(), "a GPU that passes no events on");
        let no_ecc = c.supported_event_types().unwrap();
        assert!(no_ecc.contains(EventTypes::CRITICAL_XID_ERROR) && !no_ecc.contains(EventTypes::DOUBLE_BIT_ECC_ERROR));

        let set = nvml.create_event_set().unwrap();
        let set = a.register_events(all, set).unwrap();
        let set = c.register_events(EventTypes::CRITICAL_XID_ERROR, set).unwrap();
        // Nothing due yet: the wait gives up after its timeout, no sooner.
        let began = Instant::now();
        assert!(matches!(set.wait(100), Err(NvmlError::Timeout)));
        assert!(began.elapsed() >= Duration::from_millis(100));

        // The client waits from before the events fall due.
        let began = Instant::now();
        let first = set.wait(5000).unwrap();
        assert!(began.elapsed() < Duration::from_secs(2), "delivered when due, not at the timeout");
        assert_eq!(first.event_type, EventTypes::CRITICAL_XID_ERROR);
        assert!(matches!(first.event_data, Some(XidError::Value(79))));
        assert_eq!(first.device.uuid().unwrap(), "GPU-00000000-0000-0000-0000-0000000000aa");
        let second = set.wait(5000).unwrap();
        assert_eq!(second.device.index().unwrap(), 2);
        assert!(matches!(second.event_data, Some(XidError::Unknown)), "999 is nvml.h's unknown Xid");
        let third = set.wait(5000).unwrap();
        assert_eq!(third.event_type, EventTypes::DOUBLE_BIT_ECC_ERROR);
        assert!(third.event_data.is_none());
        // Xid 13 came before the registration: never delivered.
        assert!(matches!(set.wait(200), Err(NvmlError::Timeout)));
        set.release_events().unwrap();
    });
}

#[test]
fn registering_what_a_gpu_lacks_registers_nothing() {
    scenario_test("registering_what_a_gpu_lacks_registers_nothing", Some(SCENARIO), |sim| {
        let nvml = sim.nvml().unwrap();
        let (b, c) = (nvml.device_by_index(1).unwrap(), nvml.device_by_index(2).unwrap());
        let set = nvml.create_event_set().unwrap();
        let err = b.register_events(EventTypes::CRITICAL_XID_ERROR, set).map(|_| ()).unwrap_err();
        assert!(matches!(err.error, NvmlError::NotSupported), "{err:?}");
        let set = nvml.create_event_set().unwrap();
        // ECC events need ECC on: the whole mask is refused.
        let err = c
            .register_events(EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR, set)
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err.error, NvmlError::NotSupported), "{err:?}");
    });
}

/// The raw ABI, as nvml.h declares it: the wait's data and return codes.
#[test]
fn the_wait_writes_nvml_event_data_and_says_timeout() {
    use gpuscope_nvml_sim::*;
    use nvml_wrapper_sys::bindings::{nvmlEventData_t, nvmlReturn_enum_NVML_ERROR_TIMEOUT as TIMEOUT};
    scenario_test("the_wait_writes_nvml_event_data_and_says_timeout", Some(SCENARIO), |_| {
        // SAFETY: init takes no arguments; every pointer is a live local.
        unsafe {
            assert_eq!(nvmlInit_v2(), 0);
            let mut set = std::ptr::null_mut();
            assert_eq!(nvmlEventSetCreate(&mut set), 0);
            let mut dev = std::ptr::null_mut();
            assert_eq!(nvmlDeviceGetHandleByIndex_v2(2, &mut dev), 0);
            assert_eq!(nvmlDeviceRegisterEvents(dev, 8, set), 0);
            assert_eq!(nvmlDeviceRegisterEvents(dev, 1 << 40, set), 2, "an event type nvml.h does not define");
            let mut data: nvmlEventData_t = std::mem::zeroed();
            assert_eq!(nvmlEventSetWait_v2(set, std::ptr::null_mut(), 0), 2, "data is NULL");
            assert_eq!(nvmlEventSetWait_v2(set, &mut data, 0), TIMEOUT);
            assert_eq!(nvmlEventSetWait_v2(set, &mut data, 5000), 0);
            assert_eq!((data.device, data.eventType, data.eventData), (dev, 8, 999));
            assert_eq!((data.gpuInstanceId, data.computeInstanceId), (3, 0));
            assert_eq!(nvmlEventSetFree(set), 0);
            assert_ne!(nvmlEventSetFree(set), 0, "freed already");
            assert_eq!(nvmlShutdown(), 0);
        }
    });
}

type Samples = Vec<Result<FieldValueSample, NvmlError>>;

/// The `at`th field's value, or its own error.
fn value(samples: &Samples, at: usize) -> Result<SampleValue, &NvmlError> {
    samples[at].as_ref().unwrap().value.as_ref().map(Clone::clone)
}

#[test]
fn recovery_action_and_nvlink_errors_are_field_values() {
    scenario_test("recovery_action_and_nvlink_errors_are_field_values", Some(SCENARIO), |sim| {
        let nvml = sim.nvml().unwrap();
        let fields =
            [FieldId(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), FieldId(NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL)];
        let read = |i: u32| nvml.device_by_index(i).unwrap().field_values_for(&fields).unwrap();
        let before = read(0);
        assert!(matches!(value(&before, 0), Ok(SampleValue::U32(0))), "none before 0.6 s");
        std::thread::sleep(Duration::from_millis(700));
        let after = read(0);
        assert!(matches!(value(&after, 0), Ok(SampleValue::U32(1))), "NVML_GPU_RECOVERY_ACTION_GPU_RESET");
        let replays = |v: &Samples| match value(v, 1) {
            Ok(SampleValue::U64(n)) => n,
            other => panic!("{other:?}"),
        };
        assert!(replays(&after) > replays(&before), "the replay errors grow");
        let lacking = read(1);
        assert!(matches!(value(&lacking, 0), Err(NvmlError::NotSupported)), "{lacking:?}");
        assert!(matches!(value(&lacking, 1), Err(NvmlError::NotSupported)), "no NVLink on this board");
    });
}

#[test]
fn drivers_before_r570_do_not_know_the_recovery_action() {
    let old = SCENARIO.replace("570.86.15", "565.57.01");
    scenario_test("drivers_before_r570_do_not_know_the_recovery_action", Some(&old), |sim| {
        let nvml = sim.nvml().unwrap();
        let values =
            nvml.device_by_index(0).unwrap().field_values_for(&[FieldId(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)]).unwrap();
        assert!(matches!(value(&values, 0), Err(NvmlError::NotSupported)), "{values:?}");
    });
}

#[test]
fn a_scripted_event_must_say_what_it_is() {
    scenario_test(
        "a_scripted_event_must_say_what_it_is",
        Some("[[gpu]]\n[[gpu.event]]\nat_s = 1\ntype = \"xid\"\n"),
        |sim| {
            assert!(sim.nvml().is_err(), "an xid event without its xid is refused");
        },
    );
}
