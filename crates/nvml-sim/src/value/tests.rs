use super::*;

#[derive(Deserialize)]
struct Doc {
    v: Value,
}

fn parse(text: &str) -> Result<Value, String> {
    toml::from_str::<Doc>(text).map(|d| d.v).map_err(|e| e.to_string())
}

fn wave(shape: &str) -> Value {
    parse(&format!("v = {{ min = 10, max = 90, period_s = 40, shape = \"{shape}\" }}")).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn constants_accept_ints_and_floats() {
    assert_eq!(parse("v = 42").unwrap().at(123.0), 42.0);
    assert_eq!(parse("v = 2.5").unwrap().at(0.0), 2.5);
}

#[test]
fn sine_starts_at_midpoint_and_peaks_at_quarter_period() {
    let v = wave("sine");
    assert!(close(v.at(0.0), 50.0));
    assert!(close(v.at(10.0), 90.0));
    assert!(close(v.at(30.0), 10.0));
    assert!(close(v.at(40.0), 50.0));
}

#[test]
fn triangle_square_and_ramp_follow_their_shapes() {
    let tri = wave("triangle");
    assert!(close(tri.at(0.0), 10.0));
    assert!(close(tri.at(10.0), 50.0));
    assert!(close(tri.at(20.0), 90.0));
    assert!(close(tri.at(30.0), 50.0));
    let sq = wave("square");
    assert!(close(sq.at(5.0), 10.0));
    assert!(close(sq.at(25.0), 90.0));
    let ramp = wave("ramp");
    assert!(close(ramp.at(0.0), 10.0));
    assert!(close(ramp.at(30.0), 70.0));
    assert!(close(ramp.at(40.0), 10.0));
}

#[test]
fn phase_shifts_by_a_fraction_of_the_period() {
    let v = parse("v = { min = 0, max = 100, period_s = 10, shape = \"ramp\", phase = 0.25 }").unwrap();
    assert!(close(v.at(0.0), 25.0));
    assert!(close(v.at(7.5), 0.0));
}

#[test]
fn wave_defaults_to_a_sixty_second_sine() {
    let v = parse("v = { min = 0, max = 100 }").unwrap();
    assert!(close(v.at(15.0), 100.0));
}

#[test]
fn typo_in_a_wave_names_the_key() {
    let err = parse("v = { min = 0, max = 1, perod_s = 3 }").unwrap_err();
    assert!(err.contains("perod_s"), "{err}");
    let err = parse("v = { min = 0, max = 1, shape = \"saw\" }").unwrap_err();
    assert!(err.contains("saw"), "{err}");
}

#[test]
fn degenerate_waves_and_strings_are_rejected() {
    let err = parse("v = { min = 0, max = 1, period_s = 0 }").unwrap_err();
    assert!(err.contains("period_s"), "{err}");
    assert!(parse("v = \"50\"").is_err());
}

#[test]
fn conversions_round_and_clamp() {
    assert_eq!(percent(101.2), 100);
    assert_eq!(percent(-3.0), 0);
    assert_eq!(percent(49.5), 50);
    assert_eq!(uint(-1.0), 0);
    assert_eq!(uint(f64::NAN), 0);
    assert_eq!(mib_to_bytes(1.5), 1_572_864);
}

#[test]
fn integrals_add_up_the_readings() {
    for shape in ["sine", "triangle", "square", "ramp"] {
        let v =
            parse(&format!("v = {{ min = 10, max = 90, period_s = 40, shape = \"{shape}\", phase = 0.3 }}")).unwrap();
        // The midpoint rule over 0.01 s steps, for 95 s: two periods and a part.
        let steps = 9500;
        let numeric: f64 = (0..steps).map(|i| v.at((f64::from(i) + 0.5) * 0.01) * 0.01).sum();
        let exact = v.integral(95.0);
        assert!((numeric - exact).abs() < 0.05, "{shape}: {numeric} vs {exact}");
        assert_eq!(v.integral(0.0), 0.0, "{shape}");
    }
    assert_eq!(parse("v = 1234").unwrap().integral(2.5), 3085.0);
}
