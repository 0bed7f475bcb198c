//! Leaf values of matrix.yaml that carry units: sizes, counts, durations.
//! Each refuses a bad value while it is being read, so the error gets its line:column.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::{fmt, time::Duration};

/// The largest payload one UDP datagram carries over IPv4 (65535 - 8 - 20).
pub const UDP_MAX_PAYLOAD: u64 = 65_507;

/// A payload size such as `200B`, `64KiB`, `6.5MB`; the text is kept as the label of the cell.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ByteSize {
    bytes: u64,
    label: String,
    /// Set when the text did not parse. Kept rather than raised while reading, so that
    /// validation can report it with its exact path (`payloads[1]`), which serde_yaml does
    /// not give for items of a list.
    invalid: Option<String>,
}

const SIZE_UNITS: &[(&str, u64)] = &[
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("kB", 1_000),
    ("B", 1),
];

impl ByteSize {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    pub fn label(&self) -> &str {
        &self.label
    }
    /// Why the text is not a size, if it is not.
    pub fn invalid(&self) -> Option<&str> {
        self.invalid.as_deref()
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let expected =
            "a size like 200B, 64KiB, 6.5MB or 100MB (units B, KB, MB, GB, KiB, MiB, GiB)";
        let (number, multiplier) = SIZE_UNITS
            .iter()
            .find_map(|(unit, mult)| text.strip_suffix(unit).map(|n| (n.trim(), *mult)))
            .ok_or_else(|| format!("`{text}` is not {expected}"))?;
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not {expected}"))?;
        let bytes = value * multiplier as f64;
        if !(bytes.is_finite() && bytes >= 1.0 && bytes.fract() == 0.0 && bytes <= u64::MAX as f64)
        {
            return Err(format!(
                "`{text}` is not a whole, positive number of bytes; a payload has at least 1 byte"
            ));
        }
        Ok(Self {
            bytes: bytes as u64,
            label: text.replace(' ', ""),
            invalid: None,
        })
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(ByteSize::parse(&text).unwrap_or_else(|why| ByteSize {
            bytes: 0,
            label: text,
            invalid: Some(why),
        }))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label)
    }
}

/// A count that must be at least 1 (iterations, messages); validation refuses 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count(u64);

impl Count {
    pub fn get(self) -> u64 {
        self.0
    }
    /// Why the count cannot be used, if it cannot.
    pub fn invalid(self) -> Option<&'static str> {
        (self.0 == 0).then_some("a count of 0 measures nothing; use 1 or more")
    }
}

/// A duration such as `500ms`, `5s`, `2m`. Like [`ByteSize`], bad text is kept for
/// validation to report at its exact path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationSpec(Result<Duration, String>);

impl DurationSpec {
    /// The duration; validated specs only hold valid ones.
    pub fn get(&self) -> Duration {
        self.0.clone().unwrap_or_default()
    }
    pub fn invalid(&self) -> Option<&str> {
        self.0.as_ref().err().map(String::as_str)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let expected = "a duration like 500ms, 5s or 2m (units us, ms, s, m)";
        let units: &[(&str, f64)] = &[("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0)];
        let (number, scale) = units
            .iter()
            .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n.trim(), *scale)))
            .ok_or_else(|| format!("`{text}` is not {expected}"))?;
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not {expected}"))?;
        let seconds = value * scale;
        if !(seconds.is_finite() && seconds > 0.0 && seconds < 86_400.0) {
            return Err(format!(
                "`{text}` must be more than zero and less than a day"
            ));
        }
        Ok(Self(Ok(Duration::from_secs_f64(seconds))))
    }
}

impl<'de> Deserialize<'de> for DurationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(DurationSpec::parse(&text).unwrap_or_else(|why| DurationSpec(Err(why))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(ByteSize::parse("200B").unwrap().bytes(), 200);
        assert_eq!(ByteSize::parse("64KiB").unwrap().bytes(), 65_536);
        assert_eq!(ByteSize::parse("6.5MB").unwrap().bytes(), 6_500_000);
        assert_eq!(ByteSize::parse("100 MB").unwrap().label(), "100MB");
    }

    #[test]
    fn sizes_that_do_not_parse_are_refused() {
        for bad in ["", "12", "MB", "0B", "1.5B", "-3KB", "ten MB"] {
            assert!(ByteSize::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(
            DurationSpec::parse("500ms").unwrap().get(),
            Duration::from_millis(500)
        );
        assert_eq!(
            DurationSpec::parse("2m").unwrap().get(),
            Duration::from_secs(120)
        );
        assert!(DurationSpec::parse("0s").is_err());
        assert!(DurationSpec::parse("5").is_err());
    }
}
