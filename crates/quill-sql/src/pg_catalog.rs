//! The system catalogs clients read (`pg_catalog.pg_class`,
//! `information_schema.columns`, ...), generated from Quill's catalog
//! when a query names them and read by the ordinary query path (joins,
//! subqueries, functions), so psql's `\d`, `\dt`, `\di`, `\d t` and `\l`
//! work as they do against PostgreSQL 15.
//!
//! Object ids: a table with id `n` is OID `16384 + 64n`; its primary
//! key index is that plus 1, its secondary index `i` plus `2 + i`
//! (a table has at most 48), and the sequence behind a serial column
//! plus 63. The namespaces are `pg_catalog` (11), `public` (2200) and
//! `information_schema` (13000), as in PostgreSQL.

use std::collections::HashMap;

use quill::Db;
use quill::catalog::schema::TableSchema;
use quill::catalog::{ColumnType, Value};

use crate::session::SessionInfo;
use crate::types::{Domain, MAX_VARLEN, domain};

/// OID of the `pg_catalog` namespace.
pub const PG_CATALOG_NS: i64 = 11;
/// OID of the `public` namespace.
pub const PUBLIC_NS: i64 = 2200;
/// OID of the `information_schema` namespace.
pub const INFORMATION_SCHEMA_NS: i64 = 13000;
/// OID of the btree access method.
pub const BTREE_AM: i64 = 403;
/// OID of the bootstrap superuser (every table's owner).
pub const OWNER: i64 = 10;

/// A table's OID.
pub fn table_oid(s: &TableSchema) -> i64 {
    16384 + 64 * i64::try_from(s.id).unwrap_or(i64::MAX / 128)
}

/// The PostgreSQL type OID and typmod of a column.
pub fn type_oid(c: &quill::catalog::Column) -> (i64, i64) {
    let declared = c.declared_type.as_deref().unwrap_or("");
    match (c.ty, domain(c.declared_type.as_deref(), c.ty)) {
        (ColumnType::Bool, _) => (16, -1),
        (_, Domain::SmallInt) => (21, -1),
        (ColumnType::Int32, _) => (23, -1),
        (ColumnType::Int64, _) => (20, -1),
        (_, Domain::Numeric(Some((p, s)))) => (1700, ((i64::from(p) << 16) | i64::from(s)) + 4),
        (_, Domain::Numeric(None)) => (1700, -1),
        (ColumnType::Float64, _) if declared.starts_with("real") || declared == "float4" => {
            (700, -1)
        }
        (ColumnType::Float64, _) => (701, -1),
        (_, Domain::Char(n)) => (1042, n as i64 + 4),
        (ColumnType::Text { max_len }, _) => {
            crate::types::char_limit(max_len).map_or((25, -1), |n| (1043, n as i64 + 4))
        }
        (ColumnType::Bytes { .. }, _) => (17, -1),
        (ColumnType::Timestamp, _) => (1114, -1),
    }
}

/// The built-in types: OID, name, length.
pub const TYPES: [(i64, &str, i64); 14] = [
    (16, "bool", 1),
    (17, "bytea", -1),
    (19, "name", 64),
    (20, "int8", 8),
    (21, "int2", 2),
    (23, "int4", 4),
    (25, "text", -1),
    (26, "oid", 4),
    (700, "float4", 4),
    (701, "float8", 8),
    (1042, "bpchar", -1),
    (1043, "varchar", -1),
    (1114, "timestamp", 8),
    (1700, "numeric", -1),
];

/// `format_type(oid, typmod)`: the SQL name of a type.
pub fn format_type(oid: i64, typmod: i64) -> Option<String> {
    Some(match oid {
        16 => "boolean".into(),
        17 => "bytea".into(),
        19 => "name".into(),
        20 => "bigint".into(),
        21 => "smallint".into(),
        23 => "integer".into(),
        25 => "text".into(),
        26 => "oid".into(),
        700 => "real".into(),
        701 => "double precision".into(),
        1042 if typmod > 4 => format!("character({})", typmod - 4),
        1042 => "character".into(),
        1043 if typmod > 4 => format!("character varying({})", typmod - 4),
        1043 => "character varying".into(),
        1114 => "timestamp without time zone".into(),
        1700 if typmod >= 4 => {
            let m = typmod - 4;
            format!("numeric({},{})", m >> 16, m & 0xffff)
        }
        1700 => "numeric".into(),
        _ => return None,
    })
}

/// A generated table: its columns and rows.
pub struct Virtual {
    /// Column names and types.
    pub columns: Vec<(String, ColumnType)>,
    /// Rows, one value per column.
    pub rows: Vec<Vec<Value>>,
}

const TEXT: ColumnType = ColumnType::Text {
    max_len: MAX_VARLEN,
};
const I64: ColumnType = ColumnType::Int64;
const BOOL: ColumnType = ColumnType::Bool;
const I32: ColumnType = ColumnType::Int32;

fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

fn cols(spec: &[(&str, ColumnType)]) -> Vec<(String, ColumnType)> {
    spec.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

/// The schema a table name's qualifier names, if it is a catalog one.
pub fn is_catalog_schema(schema: &str) -> bool {
    schema == "pg_catalog" || schema == "information_schema"
}

/// An index of a table, as the catalogs show it.
struct IndexInfo {
    oid: i64,
    name: String,
    columns: Vec<usize>,
    unique: bool,
    primary: bool,
}

fn indexes(s: &TableSchema) -> Vec<IndexInfo> {
    let base = table_oid(s);
    let mut out = Vec::new();
    if !s.def.primary_key.is_empty() {
        out.push(IndexInfo {
            oid: base + 1,
            name: format!("{}_pkey", s.def.name),
            columns: s.def.primary_key.clone(),
            unique: true,
            primary: true,
        });
    }
    for (i, ix) in s
        .def
        .indexes
        .iter()
        .enumerate()
        .filter(|(i, _)| s.index_is_ready(*i))
    {
        out.push(IndexInfo {
            oid: base + 2 + i as i64,
            name: ix.name.clone(),
            columns: ix.columns.clone(),
            unique: ix.unique,
            primary: false,
        });
    }
    out
}

/// Whether `s`'s primary key is a serial column (automatic keys).
fn serial_column(s: &TableSchema) -> Option<usize> {
    match s.def.primary_key.as_slice() {
        [k] => s
            .def
            .columns
            .get(*k)
            .filter(|c| {
                c.declared_type
                    .as_deref()
                    .is_some_and(|d| d.contains("serial"))
            })
            .map(|_| *k),
        _ => None,
    }
}

/// The text of a column's default (`pg_get_expr(adbin, ...)`).
fn default_text(s: &TableSchema, col: usize) -> Option<String> {
    let c = s.def.columns.get(col)?;
    if serial_column(s) == Some(col) {
        return Some(format!(
            "nextval('{}_{}_seq'::regclass)",
            s.def.name, c.name
        ));
    }
    let d = c.default.as_ref()?;
    let text = crate::types::to_text(d)?;
    Some(match d {
        Value::Text(_) => {
            let cast = match type_oid(c).0 {
                1042 => "bpchar",
                1043 => "character varying",
                _ => "text",
            };
            format!("'{}'::{cast}", text.replace('\'', "''"))
        }
        Value::Timestamp(_) => format!("'{text}'::timestamp without time zone"),
        _ => text,
    })
}

/// `pg_get_indexdef` for every index, by OID.
pub fn index_defs(db: &Db) -> HashMap<i64, String> {
    let mut out = HashMap::new();
    for s in db.tables() {
        for ix in indexes(&s) {
            let names: Vec<&str> = ix
                .columns
                .iter()
                .filter_map(|&c| s.def.columns.get(c).map(|c| c.name.as_str()))
                .collect();
            out.insert(
                ix.oid,
                format!(
                    "CREATE {}INDEX {} ON public.{} USING btree ({})",
                    if ix.unique { "UNIQUE " } else { "" },
                    ix.name,
                    s.def.name,
                    names.join(", ")
                ),
            );
        }
    }
    out
}

/// `pg_get_constraintdef` for every constraint, by OID (the index's).
pub fn constraint_defs(db: &Db) -> HashMap<i64, String> {
    let mut out = HashMap::new();
    for s in db.tables() {
        for ix in indexes(&s).into_iter().filter(|i| i.unique) {
            let names: Vec<&str> = ix
                .columns
                .iter()
                .filter_map(|&c| s.def.columns.get(c).map(|c| c.name.as_str()))
                .collect();
            let kind = if ix.primary { "PRIMARY KEY" } else { "UNIQUE" };
            out.insert(ix.oid, format!("{kind} ({})", names.join(", ")));
        }
    }
    out
}

/// Relation names by OID (for `::regclass`).
pub fn relation_names(db: &Db) -> HashMap<i64, String> {
    let mut out = HashMap::new();
    for s in db.tables() {
        out.insert(table_oid(&s), s.def.name.clone());
        for ix in indexes(&s) {
            out.insert(ix.oid, ix.name);
        }
    }
    out
}

/// The generated table `name` (in `pg_catalog` or
/// `information_schema`), or `None` if there is no such catalog.
pub fn table(db: &Db, info: &SessionInfo, schema: &str, name: &str) -> Option<Virtual> {
    let tables = db.tables();
    let v = match (schema, name) {
        ("pg_catalog", "pg_namespace") => Virtual {
            columns: cols(&[("oid", I64), ("nspname", TEXT), ("nspowner", I64)]),
            rows: vec![
                vec![
                    Value::Int64(PG_CATALOG_NS),
                    t("pg_catalog"),
                    Value::Int64(OWNER),
                ],
                vec![Value::Int64(PUBLIC_NS), t("public"), Value::Int64(OWNER)],
                vec![
                    Value::Int64(INFORMATION_SCHEMA_NS),
                    t("information_schema"),
                    Value::Int64(OWNER),
                ],
            ],
        },
        ("pg_catalog", "pg_am") => Virtual {
            columns: cols(&[("oid", I64), ("amname", TEXT), ("amtype", TEXT)]),
            rows: vec![
                vec![Value::Int64(2), t("heap"), t("t")],
                vec![Value::Int64(BTREE_AM), t("btree"), t("i")],
            ],
        },
        ("pg_catalog", "pg_class") => {
            let mut rows = Vec::new();
            for s in &tables {
                let oid = table_oid(s);
                let ixs = indexes(s);
                rows.push(class_row(oid, &s.def.name, "r", 2, !ixs.is_empty()));
                for ix in ixs {
                    rows.push(class_row(ix.oid, &ix.name, "i", BTREE_AM, false));
                }
                if let Some(c) = serial_column(s).and_then(|k| s.def.columns.get(k)) {
                    rows.push(class_row(
                        oid + 63,
                        &format!("{}_{}_seq", s.def.name, c.name),
                        "S",
                        0,
                        false,
                    ));
                }
            }
            Virtual {
                columns: cols(&[
                    ("oid", I64),
                    ("relname", TEXT),
                    ("relnamespace", I64),
                    ("relkind", TEXT),
                    ("relowner", I64),
                    ("relam", I64),
                    ("relchecks", I32),
                    ("relhasindex", BOOL),
                    ("relhasrules", BOOL),
                    ("relhastriggers", BOOL),
                    ("relrowsecurity", BOOL),
                    ("relforcerowsecurity", BOOL),
                    ("relispartition", BOOL),
                    ("reltablespace", I64),
                    ("reloftype", I64),
                    ("relpersistence", TEXT),
                    ("relreplident", TEXT),
                    ("reltoastrelid", I64),
                    ("relpartbound", TEXT),
                    ("reltuples", ColumnType::Float64),
                    ("relpages", I32),
                    ("relacl", TEXT),
                    ("reloptions", TEXT),
                ]),
                rows,
            }
        }
        ("pg_catalog", "pg_attribute") => {
            let mut rows = Vec::new();
            for s in &tables {
                let oid = table_oid(s);
                for (i, c) in s.def.columns.iter().enumerate() {
                    let (ty, typmod) = type_oid(c);
                    rows.push(vec![
                        Value::Int64(oid),
                        t(c.name.clone()),
                        Value::Int64(ty),
                        Value::Int64(typmod),
                        Value::Int32(i as i32 + 1),
                        Value::Bool(false),
                        Value::Bool(default_text(s, i).is_some()),
                        Value::Bool(!c.nullable),
                        Value::Int64(if matches!(ty, 25 | 1042 | 1043) {
                            100
                        } else {
                            0
                        }),
                        t(""),
                        t(""),
                    ]);
                }
            }
            Virtual {
                columns: cols(&[
                    ("attrelid", I64),
                    ("attname", TEXT),
                    ("atttypid", I64),
                    ("atttypmod", I64),
                    ("attnum", I32),
                    ("attisdropped", BOOL),
                    ("atthasdef", BOOL),
                    ("attnotnull", BOOL),
                    ("attcollation", I64),
                    ("attidentity", TEXT),
                    ("attgenerated", TEXT),
                ]),
                rows,
            }
        }
        ("pg_catalog", "pg_attrdef") => {
            let mut rows = Vec::new();
            for s in &tables {
                for i in 0..s.def.columns.len() {
                    if let Some(d) = default_text(s, i) {
                        rows.push(vec![
                            Value::Int64(table_oid(s) + 32 + i as i64),
                            Value::Int64(table_oid(s)),
                            Value::Int32(i as i32 + 1),
                            t(d),
                        ]);
                    }
                }
            }
            Virtual {
                columns: cols(&[
                    ("oid", I64),
                    ("adrelid", I64),
                    ("adnum", I32),
                    ("adbin", TEXT),
                ]),
                rows,
            }
        }
        ("pg_catalog", "pg_type") => Virtual {
            columns: cols(&[
                ("oid", I64),
                ("typname", TEXT),
                ("typnamespace", I64),
                ("typlen", I32),
                ("typtype", TEXT),
                ("typelem", I64),
                ("typbasetype", I64),
                ("typrelid", I64),
                ("typcollation", I64),
            ]),
            rows: TYPES
                .iter()
                .map(|(oid, name, len)| {
                    vec![
                        Value::Int64(*oid),
                        t(*name),
                        Value::Int64(PG_CATALOG_NS),
                        Value::Int32(*len as i32),
                        t("b"),
                        Value::Int64(0),
                        Value::Int64(0),
                        Value::Int64(0),
                        Value::Int64(if matches!(oid, 25 | 1042 | 1043) {
                            100
                        } else {
                            0
                        }),
                    ]
                })
                .collect(),
        },
        ("pg_catalog", "pg_collation") => Virtual {
            columns: cols(&[("oid", I64), ("collname", TEXT)]),
            rows: vec![vec![Value::Int64(100), t("default")]],
        },
        ("pg_catalog", "pg_index") => {
            let mut rows = Vec::new();
            for s in &tables {
                for ix in indexes(s) {
                    let key: Vec<String> = ix.columns.iter().map(|c| (c + 1).to_string()).collect();
                    rows.push(vec![
                        Value::Int64(ix.oid),
                        Value::Int64(table_oid(s)),
                        Value::Bool(ix.primary),
                        Value::Bool(ix.unique),
                        Value::Bool(false),
                        Value::Bool(true),
                        Value::Bool(false),
                        t(key.join(" ")),
                        Value::Int32(ix.columns.len() as i32),
                    ]);
                }
            }
            Virtual {
                columns: cols(&[
                    ("indexrelid", I64),
                    ("indrelid", I64),
                    ("indisprimary", BOOL),
                    ("indisunique", BOOL),
                    ("indisclustered", BOOL),
                    ("indisvalid", BOOL),
                    ("indisreplident", BOOL),
                    ("indkey", TEXT),
                    ("indnatts", I32),
                ]),
                rows,
            }
        }
        ("pg_catalog", "pg_constraint") => {
            let mut rows = Vec::new();
            for s in &tables {
                for ix in indexes(s).into_iter().filter(|i| i.unique) {
                    rows.push(vec![
                        Value::Int64(ix.oid),
                        t(ix.name.clone()),
                        Value::Int64(PUBLIC_NS),
                        t(if ix.primary { "p" } else { "u" }),
                        Value::Int64(table_oid(s)),
                        Value::Int64(ix.oid),
                        Value::Bool(false),
                        Value::Bool(false),
                    ]);
                }
            }
            Virtual {
                columns: cols(&[
                    ("oid", I64),
                    ("conname", TEXT),
                    ("connamespace", I64),
                    ("contype", TEXT),
                    ("conrelid", I64),
                    ("conindid", I64),
                    ("condeferrable", BOOL),
                    ("condeferred", BOOL),
                ]),
                rows,
            }
        }
        ("pg_catalog", "pg_database") => Virtual {
            columns: cols(&[
                ("oid", I64),
                ("datname", TEXT),
                ("datdba", I64),
                ("encoding", I32),
                ("datcollate", TEXT),
                ("datctype", TEXT),
                ("daticulocale", TEXT),
                ("datlocprovider", TEXT),
                ("datacl", TEXT),
                ("datistemplate", BOOL),
                ("datallowconn", BOOL),
            ]),
            rows: vec![vec![
                Value::Int64(16384),
                t(info.database.clone()),
                Value::Int64(OWNER),
                Value::Int32(6),
                t("C.UTF-8"),
                t("C.UTF-8"),
                Value::Null,
                t("c"),
                Value::Null,
                Value::Bool(false),
                Value::Bool(true),
            ]],
        },
        ("pg_catalog", "pg_roles" | "pg_user" | "pg_authid") => Virtual {
            columns: cols(&[
                ("oid", I64),
                ("rolname", TEXT),
                ("rolsuper", BOOL),
                ("usename", TEXT),
            ]),
            rows: vec![vec![
                Value::Int64(OWNER),
                t(info.user.clone()),
                Value::Bool(true),
                t(info.user.clone()),
            ]],
        },
        ("pg_catalog", "pg_policy") => empty(&[
            ("oid", I64),
            ("polname", TEXT),
            ("polrelid", I64),
            ("polcmd", TEXT),
            ("polpermissive", BOOL),
            ("polroles", TEXT),
            ("polqual", TEXT),
            ("polwithcheck", TEXT),
        ]),
        ("pg_catalog", "pg_statistic_ext") => empty(&[
            ("oid", I64),
            ("stxrelid", I64),
            ("stxname", TEXT),
            ("stxnamespace", I64),
            ("stxkind", TEXT),
            ("stxstattarget", I32),
        ]),
        ("pg_catalog", "pg_publication") => {
            empty(&[("oid", I64), ("pubname", TEXT), ("puballtables", BOOL)])
        }
        ("pg_catalog", "pg_publication_namespace") => {
            empty(&[("oid", I64), ("pnpubid", I64), ("pnnspid", I64)])
        }
        ("pg_catalog", "pg_publication_rel") => empty(&[
            ("oid", I64),
            ("prpubid", I64),
            ("prrelid", I64),
            ("prqual", TEXT),
            ("prattrs", TEXT),
        ]),
        ("pg_catalog", "pg_inherits") => empty(&[
            ("inhrelid", I64),
            ("inhparent", I64),
            ("inhseqno", I32),
            ("inhdetachpending", BOOL),
        ]),
        ("pg_catalog", "pg_trigger" | "pg_rewrite" | "pg_description") => {
            empty(&[("oid", I64), ("objoid", I64), ("description", TEXT)])
        }
        ("information_schema", "tables") => Virtual {
            columns: cols(&[
                ("table_catalog", TEXT),
                ("table_schema", TEXT),
                ("table_name", TEXT),
                ("table_type", TEXT),
            ]),
            rows: tables
                .iter()
                .map(|s| {
                    vec![
                        t(info.database.clone()),
                        t("public"),
                        t(s.def.name.clone()),
                        t("BASE TABLE"),
                    ]
                })
                .collect(),
        },
        ("information_schema", "columns") => {
            let mut rows = Vec::new();
            for s in &tables {
                for (i, c) in s.def.columns.iter().enumerate() {
                    let (ty, typmod) = type_oid(c);
                    rows.push(vec![
                        t(info.database.clone()),
                        t("public"),
                        t(s.def.name.clone()),
                        t(c.name.clone()),
                        Value::Int32(i as i32 + 1),
                        default_text(s, i).map_or(Value::Null, t),
                        t(if c.nullable { "YES" } else { "NO" }),
                        t(format_type(ty, -1).unwrap_or_default()),
                        if typmod > 4 {
                            Value::Int32(typmod as i32 - 4)
                        } else {
                            Value::Null
                        },
                    ]);
                }
            }
            Virtual {
                columns: cols(&[
                    ("table_catalog", TEXT),
                    ("table_schema", TEXT),
                    ("table_name", TEXT),
                    ("column_name", TEXT),
                    ("ordinal_position", I32),
                    ("column_default", TEXT),
                    ("is_nullable", TEXT),
                    ("data_type", TEXT),
                    ("character_maximum_length", I32),
                ]),
                rows,
            }
        }
        _ => return None,
    };
    Some(v)
}

fn empty(spec: &[(&str, ColumnType)]) -> Virtual {
    Virtual {
        columns: cols(spec),
        rows: Vec::new(),
    }
}

fn class_row(oid: i64, name: &str, kind: &str, am: i64, has_index: bool) -> Vec<Value> {
    vec![
        Value::Int64(oid),
        t(name),
        Value::Int64(PUBLIC_NS),
        t(kind),
        Value::Int64(OWNER),
        Value::Int64(if kind == "S" { 0 } else { am }),
        Value::Int32(0),
        Value::Bool(has_index),
        Value::Bool(false),
        Value::Bool(false),
        Value::Bool(false),
        Value::Bool(false),
        Value::Bool(false),
        Value::Int64(0),
        Value::Int64(0),
        t("p"),
        t("d"),
        Value::Int64(0),
        Value::Null,
        Value::Float64(-1.0),
        Value::Int32(0),
        Value::Null,
        Value::Null,
    ]
}
