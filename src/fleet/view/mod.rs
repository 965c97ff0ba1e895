//! The fleet view.
use super::FleetRx;
pub async fn run(_rx: FleetRx, _options: crate::tui::TuiOptions) -> std::io::Result<()> {
    Ok(())
}
