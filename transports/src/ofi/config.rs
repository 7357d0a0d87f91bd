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
    /// Packets no larger than the provider's `inject_size` (driver header included) leave with
    /// `fi_inject`: no send buffer, no completion to read (`MADMPI_OFI_INJECT=0`: every packet
    /// with `fi_send` from the send pool).
    pub inject: bool,
    /// One-sided puts and gets of fewer bytes than this travel as messages, not by RDMA
    /// (`MADMPI_OFI_RMA_MIN`; `None`: 0 on a fast network, 64 KiB over a provider that does
    /// RDMA in software such as `tcp;ofi_rxm`).
    pub rma_min: Option<usize>,
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
            inject: true,
            rma_min: None,
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
        let mut min = usize::MAX;
        num("MADMPI_OFI_RMA_MIN", &mut min, 0, usize::MAX - 1)?;
        c.rma_min = (min != usize::MAX).then_some(min);
        let flag = |var: &str, v: &mut bool| -> Result<()> {
            match get(var).as_deref().map(str::trim) {
                None | Some("") | Some("1") => Ok(()),
                Some("0") => {
                    *v = false;
                    Ok(())
                }
                Some(x) => Err(Error::Invalid(format!("{var}={x}: expected 0 or 1"))),
            }
        };
        flag("MADMPI_OFI_RMA", &mut c.rma)?;
        flag("MADMPI_OFI_INJECT", &mut c.inject)?;
        Ok(c)
    }
}

/// libfabric's variable for the largest message `ofi_rxm` sends in one piece (its eager
/// protocol); above it, up to its SAR limit (128 KiB), rxm cuts a message into segments of its
/// bounce-buffer size (16 KiB) that each need the peers' progress.
pub const RXM_EAGER_VAR: &str = "FI_OFI_RXM_EAGER_LIMIT";

/// The value the driver gives [`RXM_EAGER_VAR`] before libfabric starts, so that a packet of
/// `packet` bytes (the largest one it sends) travels in one piece: `Some` only over a `tcp`
/// core provider (`tcp;ofi_rxm`, where rxm's eager limit may differ from its buffer size;
/// over verbs it must not) and when the variable is not set already (`set`: its value), which
/// then wins.
///
/// Measured on a loaded 2-core host over `tcp;ofi_rxm`, 32 KiB ping-pong (an eager message of
/// one 32 KiB packet): best of three runs 46–72 µs with the limit at the packet size against
/// 86–576 µs at rxm's default 16 KiB, where every packet of more than 16 KiB was segmented.
pub fn rxm_eager_limit(provider: Option<&str>, packet: usize, set: Option<&str>) -> Option<String> {
    let core = provider?.split(';').next()?.trim();
    (core == "tcp" && set.is_none()).then(|| packet.to_string())
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
        let c = OfiConfig::from_lookup(env(&[("MADMPI_OFI_INJECT", "0")])).unwrap();
        assert!(!c.inject && c.rma);
        let e = OfiConfig::from_lookup(env(&[("MADMPI_OFI_INJECT", "yes")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("MADMPI_OFI_INJECT=yes: expected 0 or 1"), "{e}");
        let c = OfiConfig::from_lookup(env(&[("MADMPI_OFI_RMA_MIN", "4k")])).unwrap();
        assert_eq!(c.rma_min, Some(4096));
        let c = OfiConfig::from_lookup(env(&[("MADMPI_OFI_RMA_MIN", "0")])).unwrap();
        assert_eq!(c.rma_min, Some(0));
        let e = OfiConfig::from_lookup(env(&[("MADMPI_OFI_RMA_MIN", "some")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("MADMPI_OFI_RMA_MIN=some"), "{e}");
    }

    #[test]
    fn rxm_eager_limit_only_over_tcp_and_never_over_the_user() {
        let p = 69_640;
        assert_eq!(
            rxm_eager_limit(Some("tcp;ofi_rxm"), p, None).as_deref(),
            Some("69640")
        );
        assert_eq!(
            rxm_eager_limit(Some("tcp"), p, None).as_deref(),
            Some("69640")
        );
        // The user's own setting wins; other providers (verbs needs it equal to rxm's buffer
        // size) and libfabric's own choice are left alone.
        assert_eq!(rxm_eager_limit(Some("tcp;ofi_rxm"), p, Some("16384")), None);
        assert_eq!(rxm_eager_limit(Some("verbs;ofi_rxm"), p, None), None);
        assert_eq!(rxm_eager_limit(Some("shm"), p, None), None);
        assert_eq!(rxm_eager_limit(None, p, None), None);
    }
}
