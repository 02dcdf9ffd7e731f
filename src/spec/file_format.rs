//! The data-file options whose values are codes rather than numbers: `file.format` (which format
//! new files take, and which format a file is by its extension) and `file.compression` (which
//! codec). Parsed here from their text; the table's options read them.

use crate::error::{invalid_argument, Error, Result};

/// `file.compression`: the codec of new data files (Paimon's default since 0.9: zstd).
pub const FILE_COMPRESSION: &str = "file.compression";
/// `file.compression.zstd-level` (1).
pub const FILE_COMPRESSION_ZSTD_LEVEL: &str = "file.compression.zstd-level";

/// The refusal of option `key`'s value `v`, saying what it must be.
fn bad(key: &str, v: &str, want: &str) -> Error {
    invalid_argument(format!("option '{key}' must be {want}, got '{v}'"))
}

/// The codec new Parquet data files are written with (`file.compression`; files written with any
/// of these, by anyone, are read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileCompression {
    /// `none` (or `uncompressed`).
    None,
    Snappy,
    /// `lz4`: Parquet's LZ4 codec (Hadoop's framing, as Paimon's Java writer names it).
    Lz4,
    /// `lz4_raw`.
    Lz4Raw,
    /// `gzip` (or `zlib`).
    Gzip,
    Brotli,
    /// `zstd` at `file.compression.zstd-level` (1 to 22).
    Zstd(i32),
    /// `lzo`: no LZO codec here; writing such a table is refused (files in other codecs read).
    Lzo,
}

impl FileCompression {
    /// Paimon's codec names, case-insensitive (pure).
    pub fn parse(codec: Option<&str>, zstd_level: Option<&str>) -> Result<Self> {
        let level = match zstd_level.map(str::trim) {
            None => 1,
            Some(v) => match v.parse::<i32>() {
                Ok(l) if (1..=22).contains(&l) => l,
                _ => {
                    return Err(bad(
                        FILE_COMPRESSION_ZSTD_LEVEL,
                        v,
                        "a zstd level from 1 to 22",
                    ))
                }
            },
        };
        let Some(codec) = codec.map(str::trim) else {
            return Ok(Self::Zstd(level));
        };
        Ok(match codec.to_ascii_lowercase().as_str() {
            "none" | "uncompressed" => Self::None,
            "snappy" => Self::Snappy,
            "lz4" => Self::Lz4,
            "lz4_raw" => Self::Lz4Raw,
            "gzip" | "zlib" => Self::Gzip,
            "brotli" => Self::Brotli,
            "zstd" => Self::Zstd(level),
            "lzo" => Self::Lzo,
            _ => {
                return Err(bad(
                    FILE_COMPRESSION,
                    codec,
                    "one of zstd, snappy, lz4, lz4_raw, gzip, brotli, none",
                ))
            }
        })
    }
}

/// The format of a data file: Paimon names each file with its format's extension, and every
/// reader (Java's since 0.9, pypaimon, tidelake) reads a file by that extension, so one table may
/// hold files of several formats (its `file.format` changed, or a writer chose another).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Parquet,
    Orc,
    Avro,
}

impl FileFormat {
    /// A `file.format` value, case-insensitive; none for formats tidelake does not write (pure).
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "parquet" => Some(Self::Parquet),
            "orc" => Some(Self::Orc),
            "avro" => Some(Self::Avro),
            _ => None,
        }
    }

    /// The format of the data file `name`, by its extension; Parquet unless it says otherwise
    /// (pure).
    pub fn of_file(name: &str) -> Self {
        if name.ends_with(Self::Orc.suffix()) {
            Self::Orc
        } else if name.ends_with(Self::Avro.suffix()) {
            Self::Avro
        } else {
            Self::Parquet
        }
    }

    /// The extension of its files, with the dot.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Parquet => ".parquet",
            Self::Orc => ".orc",
            Self::Avro => ".avro",
        }
    }
}
