//! The `ofi` driver's settings, from `MADMPI_OFI_*` (and libfabric's own `FI_PROVIDER`).

use crate::{Error, Result};

/// Settings of the `ofi` driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfiConfig {
    /// The provider (`MADMPI_OFI_PROVIDER`, else `FI_PROVIDER`; `None`: libfabric's first
    /// choice), e.g. `tcp;ofi_rxm`, `verbs;ofi_rxm`, `efa`, `cxi`, `shm`.
    pub provider: Option<String>,
    /// The largest packet (`MADMPI_OFI_MAX_PACKET`; lowered to the provider's `max_msg_size`).
    /// Every rank of a job must use the same value.
    pub max_packet: usize,
    /// Messages up to this many bytes travel eagerly (`MADMPI_OFI_EAGER`).
    pub eager_threshold: usize,
    /// Receive bounce buffers posted at once (`MADMPI_OFI_RX`; lowered to the provider's
    /// receive queue size).
    pub rx_buffers: usize,
    /// Send bounce buffers, the credits of the link (`MADMPI_OFI_TX`; lowered to the
    /// provider's transmit queue size).
    pub tx_buffers: usize,
    /// Rendezvous data is read by the receiver with `fi_read` from the sender's registered
    /// buffer when the provider offers `FI_RMA` (`MADMPI_OFI_RMA=0`: fragments instead).
    pub rma: bool,
}

impl Default for OfiConfig {
    fn default() -> OfiConfig {
        OfiConfig {
            provider: None,
            max_packet: (64 << 10) + 4096,
            eager_threshold: 32 << 10,
            rx_buffers: 64,
            tx_buffers: 64,
            rma: true,
        }
    }
}

/// Smallest `max_packet`: room for a chunk header and some payload.
const MIN_PACKET: usize = 256;

impl OfiConfig {
    /// The settings from the environment.
    ///
    /// # Errors
    ///
    /// A malformed or out-of-range value, naming the variable.
    pub fn from_env() -> Result<OfiConfig> {
        OfiConfig::from_lookup(|k| std::env::var(k).ok())
    }

    /// The settings from `get` (a variable's value by name).
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<OfiConfig> {
        let mut c = OfiConfig {
            provider: get("MADMPI_OFI_PROVIDER")
                .or_else(|| get("FI_PROVIDER"))
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty()),
            ..OfiConfig::default()
        };
        let num = |var: &str, v: &mut usize, lo: usize, hi: usize| -> Result<()> {
            let Some(s) = get(var) else { return Ok(()) };
            let n: usize = crate::tcp::parse_size(s.trim())
                .ok_or_else(|| Error::Invalid(format!("{var}={s}: not a size")))?;
            if !(lo..=hi).contains(&n) {
                return Err(Error::Invalid(format!(
                    "{var}={s}: out of range ({lo} to {hi})"
                )));
            }
            *v = n;
            Ok(())
        };
        num(
            "MADMPI_OFI_MAX_PACKET",
            &mut c.max_packet,
            MIN_PACKET,
            64 << 20,
        )?;
        num("MADMPI_OFI_EAGER", &mut c.eager_threshold, 0, 64 << 20)?;
        num("MADMPI_OFI_RX", &mut c.rx_buffers, 2, 1 << 16)?;
        num("MADMPI_OFI_TX", &mut c.tx_buffers, 1, 1 << 16)?;
        match get("MADMPI_OFI_RMA").as_deref().map(str::trim) {
            None | Some("") | Some("1") => {}
            Some("0") => c.rma = false,
            Some(v) => {
                return Err(Error::Invalid(format!(
                    "MADMPI_OFI_RMA={v}: expected 0 or 1"
                )));
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_and_checked() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            OfiConfig::from_lookup(env(&[])).unwrap(),
            OfiConfig::default()
        );
        let c = OfiConfig::from_lookup(env(&[
            ("FI_PROVIDER", "shm"),
            ("MADMPI_OFI_MAX_PACKET", "16k"),
            ("MADMPI_OFI_TX", "8"),
        ]))
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("shm"));
        assert_eq!((c.max_packet, c.tx_buffers), (16 << 10, 8));
        let c = OfiConfig::from_lookup(env(&[
            ("FI_PROVIDER", "shm"),
            ("MADMPI_OFI_PROVIDER", "tcp;ofi_rxm"),
        ]))
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("tcp;ofi_rxm"));
        let e = OfiConfig::from_lookup(env(&[("MADMPI_OFI_RX", "1")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MADMPI_OFI_RX=1") && e.contains("out of range"),
            "{e}"
        );
        let e = OfiConfig::from_lookup(env(&[("MADMPI_OFI_EAGER", "lots")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("MADMPI_OFI_EAGER=lots"), "{e}");
    }
}
