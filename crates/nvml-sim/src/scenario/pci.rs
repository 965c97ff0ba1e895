//! PCI addresses, parsed once so that `nvmlPciInfo_t`'s numeric fields and
//! its strings always agree.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PciAddress {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl PciAddress {
    /// Where the default bus IDs put GPU `index`: one bus per 0x10, as on
    /// typical multi-GPU servers.
    pub(crate) fn default_for(index: usize) -> Self {
        Self { domain: 0, bus: (0x18 + index as u32 * 0x10) & 0xff, device: 0, function: 0 }
    }

    /// Accepts `DDDDDDDD:BB:DD.F` and the legacy 4-digit-domain form.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("pci_bus_id {text:?} is not of the form 00000000:18:00.0");
        let (domain, rest) = text.split_once(':').ok_or_else(bad)?;
        let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
        let (device, function) = rest.split_once('.').ok_or_else(bad)?;
        let field = |s: &str, max_digits: usize, max: u32| {
            let ok = !s.is_empty() && s.len() <= max_digits;
            let v = ok.then(|| u32::from_str_radix(s, 16).ok()).flatten();
            v.filter(|v| *v <= max).ok_or_else(bad)
        };
        Ok(Self {
            domain: field(domain, 8, u32::MAX)?,
            bus: field(bus, 2, 0xff)?,
            device: field(device, 2, 0x1f)?,
            function: field(function, 1, 7)?,
        })
    }

    /// The form NVML reports in `busId` (upper-case hex, 8-digit domain).
    pub(crate) fn bus_id(&self) -> String {
        format!("{:08X}:{:02X}:{:02X}.{:X}", self.domain, self.bus, self.device, self.function)
    }

    /// The 16-byte `busIdLegacy` form, which only has room for a 4-digit domain.
    pub(crate) fn bus_id_legacy(&self) -> String {
        format!("{:04X}:{:02X}:{:02X}.{:X}", self.domain & 0xffff, self.bus, self.device, self.function)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_domain_widths() {
        let a = PciAddress::parse("00000000:3b:00.0").unwrap();
        assert_eq!(a, PciAddress::parse("0000:3B:00.0").unwrap());
        assert_eq!((a.domain, a.bus, a.device), (0, 0x3b, 0));
        assert_eq!(a.bus_id(), "00000000:3B:00.0");
        assert_eq!(a.bus_id_legacy(), "0000:3B:00.0");
    }

    #[test]
    fn rejects_malformed_ids() {
        for bad in ["", "18:00.0", "0000:118:00.0", "0000:18:00", "0000:18:40.0", "x:18:00.0"] {
            assert!(PciAddress::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_step_by_sixteen_buses() {
        assert_eq!(PciAddress::default_for(0).bus_id(), "00000000:18:00.0");
        assert_eq!(PciAddress::default_for(3).bus_id(), "00000000:48:00.0");
    }
}
