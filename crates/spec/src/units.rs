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
    invalid: Option<UnitError>,
}

/// Why the text of a size or a duration is not one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum UnitError {
    #[error("`{text}` is not {expected}")]
    NotUnderstood {
        text: String,
        expected: &'static str,
    },
    #[error("`{text}` is more bytes than 64 bits count (at most {} B)", u64::MAX)]
    MoreBytesThan64Bits { text: String },
    #[error("`{text}` is not a whole number of bytes; a payload has at least 1 byte")]
    NotWholeBytes { text: String },
    #[error("`{text}` is not a whole, positive number of bytes; a payload has at least 1 byte")]
    NoBytes { text: String },
    #[error("`{text}` must be more than zero and less than a day")]
    NotADuration { text: String },
    #[error("`{text}` is less than 1 ns; a duration must be more than zero")]
    UnderANanosecond { text: String },
    #[error("`{text}` must be less than a day")]
    ADayOrMore { text: String },
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
    pub fn invalid(&self) -> Option<&UnitError> {
        self.invalid.as_ref()
    }

    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let text = text.trim();
        let not_understood = || UnitError::NotUnderstood {
            text: text.to_string(),
            expected:
                "a size like 200B, 64KiB, 6.5MB or 100MB (units B, KB, MB, GB, KiB, MiB, GiB)",
        };
        let (number, unit, multiplier) = SIZE_UNITS
            .iter()
            .find_map(|(unit, mult)| text.strip_suffix(unit).map(|n| (n.trim(), *unit, *mult)))
            .ok_or_else(not_understood)?;
        let decimal = Decimal::parse(number).ok_or_else(not_understood)?;
        let bytes = decimal.times(multiplier).map_err(|why| {
            let text = text.to_string();
            match why {
                Inexact::Overflow => UnitError::MoreBytesThan64Bits { text },
                Inexact::Fraction => UnitError::NotWholeBytes { text },
            }
        })?;
        if bytes == 0 {
            return Err(UnitError::NoBytes {
                text: text.to_string(),
            });
        }
        Ok(Self {
            bytes,
            label: format!("{number}{unit}"),
            invalid: None,
        })
    }
}

/// A number written in decimal, `123` or `6.5`: digits only, no sign or exponent, so
/// that it converts to a whole count exactly or not at all.
struct Decimal<'a> {
    whole: &'a str,
    fraction: &'a str,
}

/// Why a decimal times a unit is not a whole `u64`.
#[derive(Debug, PartialEq, Eq)]
enum Inexact {
    Overflow,
    Fraction,
}

impl<'a> Decimal<'a> {
    fn parse(number: &'a str) -> Option<Self> {
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        (digits(whole) && digits(fraction) && !(whole.is_empty() && fraction.is_empty()))
            .then_some(Self { whole, fraction })
    }

    /// `self * unit`, exactly, with checked arithmetic.
    fn times(&self, unit: u64) -> Result<u64, Inexact> {
        let mut whole: u64 = 0;
        for digit in self.whole.bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u64::from(digit - b'0')))
                .ok_or(Inexact::Overflow)?;
        }
        let whole = whole.checked_mul(unit).ok_or(Inexact::Overflow)?;
        // The fraction's digits that matter: trailing zeros change nothing, and a unit of
        // at most 2^64 cannot make more than 20 other digits whole.
        let fraction = self.fraction.trim_end_matches('0');
        if fraction.len() > 20 {
            return Err(Inexact::Fraction);
        }
        let mut numerator: u128 = 0;
        for digit in fraction.bytes() {
            numerator = numerator * 10 + u128::from(digit - b'0');
        }
        let denominator = 10u128.pow(fraction.len() as u32);
        // numerator < 10^20 and unit < 2^64: the product fits 128 bits.
        let scaled = numerator * u128::from(unit);
        if !scaled.is_multiple_of(denominator) {
            return Err(Inexact::Fraction);
        }
        let part = u64::try_from(scaled / denominator).map_err(|_| Inexact::Overflow)?;
        whole.checked_add(part).ok_or(Inexact::Overflow)
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
pub struct DurationSpec(Result<Duration, UnitError>);

impl DurationSpec {
    /// The duration; validated specs only hold valid ones.
    pub fn get(&self) -> Duration {
        self.0.clone().unwrap_or_default()
    }
    pub fn invalid(&self) -> Option<&UnitError> {
        self.0.as_ref().err()
    }

    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let text = text.trim();
        let not_understood = || UnitError::NotUnderstood {
            text: text.to_string(),
            expected: "a duration like 500ms, 5s or 2m (units us, ms, s, m)",
        };
        let units: &[(&str, u64)] = &[
            ("us", 1_000),
            ("ms", 1_000_000),
            ("s", 1_000_000_000),
            ("m", 60_000_000_000),
        ];
        let (number, ns_per_unit) = units
            .iter()
            .find_map(|(unit, ns)| text.strip_suffix(unit).map(|n| (n.trim(), *ns)))
            .ok_or_else(not_understood)?;
        let too_long = || UnitError::ADayOrMore {
            text: text.to_string(),
        };
        let nanos = match Decimal::parse(number) {
            // Decimal text converts exactly; a part of a nanosecond is dropped.
            Some(decimal) => decimal.times_truncated(ns_per_unit).ok_or_else(too_long)?,
            // Anything else that reads as a number (`1e-3s`) goes through f64, refused
            // when it is not finite, or is negative.
            None => {
                let value: f64 = number.parse().map_err(|_| not_understood())?;
                let nanos = value * ns_per_unit as f64;
                if nanos.is_nan() || nanos < 0.0 {
                    return Err(UnitError::NotADuration {
                        text: text.to_string(),
                    });
                }
                if nanos >= MAX_DURATION_NS as f64 {
                    return Err(too_long());
                }
                nanos as u64
            }
        };
        if nanos == 0 {
            return Err(UnitError::UnderANanosecond {
                text: text.to_string(),
            });
        }
        if nanos >= MAX_DURATION_NS {
            return Err(too_long());
        }
        Ok(Self(Ok(Duration::from_nanos(nanos))))
    }
}

/// Durations are less than a day, in nanoseconds.
const MAX_DURATION_NS: u64 = 86_400 * 1_000_000_000;

impl Decimal<'_> {
    /// `self * unit`, a fraction of 1 dropped; None when it does not fit 64 bits.
    fn times_truncated(&self, unit: u64) -> Option<u64> {
        let mut whole: u64 = 0;
        for digit in self.whole.bytes() {
            whole = whole
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        let whole = whole.checked_mul(unit)?;
        // Digits beyond the 20th add less than 1 to a unit of less than 2^64.
        let fraction = &self.fraction[..self.fraction.len().min(20)];
        let mut numerator: u128 = 0;
        for digit in fraction.bytes() {
            numerator = numerator * 10 + u128::from(digit - b'0');
        }
        let part = numerator * u128::from(unit) / 10u128.pow(fraction.len() as u32);
        whole.checked_add(u64::try_from(part).ok()?)
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
        for bad in [
            "", "12", "MB", "0B", "1.5B", "-3KB", "ten MB", "1e3B", "infB", "NaNB", ".",
        ] {
            assert!(ByteSize::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn sizes_are_exact_or_refused_never_rounded() {
        assert_eq!(
            ByteSize::parse("18446744073709551615B").unwrap().bytes(),
            u64::MAX
        );
        assert_eq!(
            ByteSize::parse("9007199254740993B").unwrap().bytes(),
            9_007_199_254_740_993
        );
        assert_eq!(ByteSize::parse("0.5KiB").unwrap().bytes(), 512);
        assert_eq!(
            ByteSize::parse("1.000000000000000000000000GB")
                .unwrap()
                .bytes(),
            1_000_000_000
        );
        for overflow in [
            "18446744073709551616B",
            "17179869184GiB",
            "99999999999999999999999999B",
        ] {
            let why = ByteSize::parse(overflow).unwrap_err();
            assert_eq!(
                why,
                UnitError::MoreBytesThan64Bits {
                    text: overflow.into()
                }
            );
            assert!(
                why.to_string().contains("more bytes than 64 bits count"),
                "{overflow}: {why}"
            );
        }
        let why = ByteSize::parse("0.3KiB").unwrap_err();
        assert_eq!(
            why,
            UnitError::NotWholeBytes {
                text: "0.3KiB".into()
            }
        );
        assert!(why.to_string().contains("not a whole number of bytes"));
    }

    #[test]
    fn durations_are_refused_under_a_nanosecond_and_from_a_day() {
        assert_eq!(
            DurationSpec::parse("1.5us").unwrap().get(),
            Duration::from_nanos(1500)
        );
        assert_eq!(
            DurationSpec::parse("0.000000001s").unwrap().get(),
            Duration::from_nanos(1)
        );
        assert_eq!(
            DurationSpec::parse("1e-3s").unwrap().get(),
            Duration::from_millis(1)
        );
        for bad in [
            "1e-300s",
            "0.0001us",
            "0ms",
            "NaNs",
            "-1s",
            "infs",
            "1e300s",
            "1440m",
            "999999999999999999999999s",
        ] {
            assert!(DurationSpec::parse(bad).is_err(), "{bad} accepted");
        }
        assert!(DurationSpec::parse("1439.9m").is_ok());
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
