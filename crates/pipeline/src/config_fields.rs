//! Config fields that are written as strings and held as types: each is parsed once, when the
//! config is read, and a bad value is an error naming the field's table there. For
//! `#[serde(with = "…")]`; the JSON Schema of each is a string (`#[schemars(with = "String")]`).

/// `openings = "builtin:balanced-8"`, a file of USI position lines, or `""` for none, held as the
/// loaded [`koma_shogi::OpeningSuite`] (written back as its name).
pub mod opening_suite {
    use koma_shogi::OpeningSuite;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(suite: &OpeningSuite, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(suite.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OpeningSuite, D::Error> {
        let name = String::deserialize(d)?;
        OpeningSuite::named(&name).map_err(|e| D::Error::custom(format!("openings = {name:?}: {e}")))
    }
}

/// `records = "kif"` (`kif`, `kifu`, `csa`, `ki2`, `usi`, `sfen`) or `""` for none.
pub mod record_format {
    use koma_selfplay::RecordFormat;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(format: &Option<RecordFormat>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(format.map_or("", RecordFormat::name))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RecordFormat>, D::Error> {
        let name = String::deserialize(d)?;
        if name.is_empty() {
            return Ok(None);
        }
        let names: Vec<&str> = RecordFormat::ALL.iter().map(|f| f.name()).collect();
        RecordFormat::from_name(&name).map(Some).ok_or_else(|| {
            D::Error::custom(format!("records = {name:?}: expected one of {} or \"\"", names.join(", ")))
        })
    }
}
