//! The name service of dynamic process management (MPI 4.1 §11.4.4): MPI_Publish_name,
//! MPI_Lookup_name, MPI_Unpublish_name, served by the process manager's PMI-1 name service
//! (`publish_name`, `lookup_name`, `unpublish_name`: our `mpirun` holds one table per job, as
//! Hydra does without `-nameserver`). A process started without a launcher (a singleton) keeps
//! its names in a table of its own, which is then the whole scope of the service.
//!
//! Service and port names may hold any byte but NUL; PMI-1 carries only tokens without spaces
//! or backslashes, so both travel percent-encoded (every byte outside `[A-Za-z0-9._:/@+,~-]`
//! becomes `%XX`), and a lookup decodes the port it gets back.

use std::collections::HashMap;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::lifetime::with_pmi;
use crate::error::{err, Error, ErrorClass, Result};

/// The names of a process without a launcher.
static LOCAL: Lazy<Mutex<HashMap<String, String>>> = Lazy::new(|| Mutex::new(HashMap::new()));

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b".:/@+,~-_".contains(&b)
}

/// `s` as one PMI token.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`encode`]; `None` for a token it could not have made.
fn decode(t: &str) -> Option<String> {
    let b = t.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = t.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The service name as a token, or the error of a name that can never be published.
fn service_token(service: &str, class: ErrorClass) -> Result<String> {
    if service.is_empty() {
        return err(class, "the service name is empty");
    }
    let t = encode(service);
    if t.len() > madmpi_pmi::client::NAME_MAX {
        return err(
            class,
            format!(
                "the service name '{service}' is too long for the name service ({} bytes encoded, \
                 at most {})",
                t.len(),
                madmpi_pmi::client::NAME_MAX
            ),
        );
    }
    Ok(t)
}

fn port_token(port: &str) -> Result<String> {
    if port.is_empty() {
        return err(ErrorClass::Port, "the port name is empty");
    }
    let t = encode(port);
    if t.len() > madmpi_pmi::client::NAME_MAX {
        return err(
            ErrorClass::Port,
            format!(
                "the port name is too long for the name service ({} bytes encoded, at most {})",
                t.len(),
                madmpi_pmi::client::NAME_MAX
            ),
        );
    }
    Ok(t)
}

fn pmi_failure(call: &str, e: madmpi_pmi::Error) -> Error {
    Error::new(
        ErrorClass::Intern,
        format!("{call}: the process manager's name service failed: {e}"),
    )
}

/// MPI_Publish_name: `service` names `port` until unpublished. Publishing a name that is
/// already published (by any process of the job) fails with MPI_ERR_NAME, as in MPICH.
pub fn publish_name(service: &str, port: &str) -> Result<()> {
    let (s, p) = (service_token(service, ErrorClass::Name)?, port_token(port)?);
    with_pmi(|pmi| match pmi {
        None => {
            let mut l = LOCAL.lock();
            if l.contains_key(&s) {
                return err(
                    ErrorClass::Name,
                    format!("the service name '{service}' is already published"),
                );
            }
            l.insert(s, p);
            Ok(())
        }
        Some(c) => match c.publish_name(&s, &p) {
            Ok(()) => Ok(()),
            Err(madmpi_pmi::Error::Rejected { msg, .. }) => err(
                ErrorClass::Name,
                format!(
                    "the service name '{service}' cannot be published: {}",
                    if msg.is_empty() {
                        "the process manager refused it"
                    } else {
                        msg.as_str()
                    }
                ),
            ),
            Err(e) => Err(pmi_failure("MPI_Publish_name", e)),
        },
    })
}

/// MPI_Lookup_name: the port published under `service`; MPI_ERR_NAME when none is.
pub fn lookup_name(service: &str) -> Result<String> {
    let s = service_token(service, ErrorClass::Name)?;
    let not_found = || {
        Error::new(
            ErrorClass::Name,
            format!("no port is published under the service name '{service}'"),
        )
    };
    let token = with_pmi(|pmi| match pmi {
        None => LOCAL.lock().get(&s).cloned().ok_or_else(not_found),
        Some(c) => match c.lookup_name(&s) {
            Ok(p) => Ok(p),
            Err(madmpi_pmi::Error::NotFound(_)) => Err(not_found()),
            Err(e) => Err(pmi_failure("MPI_Lookup_name", e)),
        },
    })?;
    decode(&token).ok_or_else(|| {
        Error::new(
            ErrorClass::Name,
            format!(
                "the service name '{service}' names '{token}', which is not a port name \
                 published by madmpi"
            ),
        )
    })
}

/// MPI_Unpublish_name: withdraws `service`, which must be published with `port` (the standard
/// asks for both to be those given to MPI_Publish_name); MPI_ERR_SERVICE otherwise. The check
/// of the port and the withdrawal are two requests: a process unpublishing the same name at
/// the same time may withdraw it in between, and this call then fails with MPI_ERR_SERVICE.
pub fn unpublish_name(service: &str, port: &str) -> Result<()> {
    let s = service_token(service, ErrorClass::Service)?;
    let p = port_token(port)?;
    let not_published = || {
        Error::new(
            ErrorClass::Service,
            format!("the service name '{service}' is not published"),
        )
    };
    let other_port = || {
        Error::new(
            ErrorClass::Service,
            format!("the service name '{service}' is published with another port than '{port}'"),
        )
    };
    with_pmi(|pmi| match pmi {
        None => {
            let mut l = LOCAL.lock();
            match l.get(&s) {
                None => Err(not_published()),
                Some(q) if *q != p => Err(other_port()),
                Some(_) => {
                    l.remove(&s);
                    Ok(())
                }
            }
        }
        Some(c) => {
            match c.lookup_name(&s) {
                Ok(q) if q != p => return Err(other_port()),
                Ok(_) => {}
                Err(madmpi_pmi::Error::NotFound(_)) => return Err(not_published()),
                Err(e) => return Err(pmi_failure("MPI_Unpublish_name", e)),
            }
            match c.unpublish_name(&s) {
                Ok(()) => Ok(()),
                Err(madmpi_pmi::Error::NotFound(_)) => Err(not_published()),
                Err(e) => Err(pmi_failure("MPI_Unpublish_name", e)),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for s in [
            "svc",
            "my service",
            "a%b=c\\d\n",
            "tcp:127.0.0.1:4000/job-7",
            "é",
        ] {
            let t = encode(s);
            assert!(t.bytes().all(|b| plain(b) || b == b'%'), "{t}");
            assert_eq!(decode(&t).as_deref(), Some(s));
        }
        assert_eq!(encode("a b"), "a%20b");
        assert_eq!(decode("%2"), None);
        assert_eq!(decode("%zz"), None);
    }
}
