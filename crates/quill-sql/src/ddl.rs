//! CREATE TABLE, DROP TABLE and CREATE INDEX, onto the engine's catalog.
//! DDL commits on its own (as the engine's DDL does), whether or not a
//! transaction block is open.

use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::{Db, Error};
use sqlparser::ast::{self, ColumnOption, TableConstraint};

use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{Ctx, NoColumns, bind, name_of};
use crate::session::Output;
use crate::session::SessionInfo;
use crate::types::column_type;

/// The table an object name names (`t` or `public.t`).
pub fn table_name(name: &ast::ObjectName) -> SqlResult<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(name_of(i)),
            other => Err(SqlError::unsupported(format!("the name {other}"))),
        })
        .collect::<SqlResult<_>>()?;
    match parts.as_slice() {
        [t] => Ok(t.clone()),
        [s, t] if s == "public" => Ok(t.clone()),
        _ => Err(SqlError::new(
            SqlState::UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist (Quill has one schema, public)"),
        )),
    }
}

fn index_columns(cols: &[ast::IndexColumn], def: &TableDef) -> SqlResult<Vec<usize>> {
    cols.iter()
        .map(|c| {
            let name = match &c.column.expr {
                ast::Expr::Identifier(i) => name_of(i),
                other => return Err(SqlError::unsupported(format!("an index on {other}"))),
            };
            def.columns
                .iter()
                .position(|x| x.name == name)
                .ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_COLUMN,
                        format!("column \"{name}\" named in key does not exist"),
                    )
                })
        })
        .collect()
}

/// `CREATE TABLE [IF NOT EXISTS]`.
pub fn create_table(db: &Db, c: &ast::CreateTable) -> SqlResult<Output> {
    let name = table_name(&c.name)?;
    if c.query.is_some() {
        return Err(SqlError::unsupported("CREATE TABLE AS"));
    }
    let mut def = TableDef {
        name: name.clone(),
        columns: Vec::with_capacity(c.columns.len()),
        primary_key: Vec::new(),
        indexes: Vec::new(),
    };
    let mut serial = Vec::new();
    let mut uniques: Vec<Vec<usize>> = Vec::new();
    for (pos, col) in c.columns.iter().enumerate() {
        let cname = name_of(&col.name);
        if def.columns.iter().any(|x| x.name == cname) {
            return Err(SqlError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("column \"{cname}\" specified more than once"),
            ));
        }
        let ty = column_type(&col.data_type)?;
        let declared = col.data_type.to_string().to_lowercase();
        let mut nullable = !ty.serial;
        let mut default = None;
        for opt in &col.options {
            match &opt.option {
                ColumnOption::NotNull => nullable = false,
                ColumnOption::Null => nullable = true,
                ColumnOption::PrimaryKey(_) => {
                    if !def.primary_key.is_empty() {
                        return Err(multiple_pk(&name));
                    }
                    def.primary_key.push(pos);
                    nullable = false;
                }
                ColumnOption::Unique(_) => uniques.push(vec![pos]),
                ColumnOption::Default(e) => {
                    default = Some(default_value(&cname, e, &declared, ty.stored)?)
                }
                other => return Err(SqlError::unsupported(format!("the column option {other}"))),
            }
        }
        if ty.serial {
            serial.push(pos);
        }
        let mut column = Column::new(cname, ty.stored, nullable);
        if declared.len() <= quill::catalog::schema::MAX_DECLARED_TYPE_LEN {
            column = column.with_declared_type(declared);
        }
        if let Some(d) = default
            && !d.is_null()
        {
            column = column.with_default(d);
        }
        def.columns.push(column);
    }
    for k in &c.constraints {
        match k {
            TableConstraint::PrimaryKey(p) => {
                if !def.primary_key.is_empty() {
                    return Err(multiple_pk(&name));
                }
                def.primary_key = index_columns(&p.columns, &def)?;
                for &i in &def.primary_key {
                    if let Some(col) = def.columns.get_mut(i) {
                        col.nullable = false;
                    }
                }
            }
            TableConstraint::Unique(u) => uniques.push(index_columns(&u.columns, &def)?),
            other => return Err(SqlError::unsupported(format!("the constraint {other}"))),
        }
    }
    // A serial column takes the engine's automatic keys, which only a
    // one-column bigint primary key has.
    for s in serial {
        if def.primary_key != [s] {
            return Err(SqlError::unsupported(
                "a serial column that is not the whole primary key",
            ));
        }
    }
    for (n, cols) in uniques.into_iter().enumerate() {
        let names: Vec<&str> = cols
            .iter()
            .filter_map(|&i| def.columns.get(i).map(|c| c.name.as_str()))
            .collect();
        def.indexes.push(IndexDef {
            name: format!(
                "{name}_{}_key{}",
                names.join("_"),
                if n == 0 { String::new() } else { n.to_string() }
            ),
            columns: cols,
            unique: true,
        });
    }
    if def.primary_key.is_empty() && def.columns.is_empty() {
        return Err(SqlError::unsupported("a table with no columns"));
    }
    match db.create_table(def) {
        Ok(_) => Ok(Output::tag("CREATE TABLE")),
        Err(Error::TableExists { .. }) if c.if_not_exists => Ok(Output::tag("CREATE TABLE")),
        Err(Error::TableExists { name }) => Err(SqlError::new(
            SqlState::DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// A column's DEFAULT: a constant (evaluated once, here), stored as the
/// column's declared type stores it. Defaults that call functions (`now()`, `nextval`)
/// would have to run per row, and are refused.
fn default_value(column: &str, e: &ast::Expr, declared: &str, ty: ColumnType) -> SqlResult<Value> {
    fn constant(e: &ast::Expr) -> bool {
        match e {
            ast::Expr::Value(_) => true,
            ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => constant(expr),
            ast::Expr::UnaryOp { expr, .. } => constant(expr),
            _ => false,
        }
    }
    if !constant(e) {
        return Err(SqlError::unsupported(format!(
            "DEFAULT {e} for column \"{column}\" (only constant defaults)"
        )));
    }
    let info = SessionInfo::default();
    let ctx = Ctx {
        params: Some(&[]),
        param_types: &[],
        info: &info,
        cancel: &crate::expr::NEVER_CANCELED,
        deadline: None,
    };
    let v = bind(e, &NoColumns(ctx))?.eval(&[])?;
    crate::types::store_as(v, ty, crate::types::domain(Some(declared), ty))
}

fn multiple_pk(table: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_COLUMN_REFERENCE,
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

/// `DROP TABLE [IF EXISTS] t [, ...]`: every name is checked before any
/// table is dropped.
pub fn drop_tables(db: &Db, names: &[ast::ObjectName], if_exists: bool) -> SqlResult<Output> {
    let names: Vec<String> = names.iter().map(table_name).collect::<SqlResult<_>>()?;
    if !if_exists && let Some(missing) = names.iter().find(|n| db.table(n).is_err()) {
        return Err(no_table(missing));
    }
    for n in &names {
        match db.drop_table(n) {
            Ok(()) => {}
            Err(Error::NoSuchTable { .. }) if if_exists => {}
            Err(Error::NoSuchTable { name }) => return Err(no_table(&name)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Output::tag("DROP TABLE"))
}

/// 42P01 for table `name`.
pub fn no_table(name: &str) -> SqlError {
    SqlError::new(
        SqlState::UNDEFINED_TABLE,
        format!("relation \"{name}\" does not exist"),
    )
}

/// `CREATE [UNIQUE] INDEX [CONCURRENTLY] [IF NOT EXISTS] name ON t (cols)`.
/// As in PostgreSQL, a plain build holds off writers of the table until
/// it is done (and is the faster build: sorted, in bulk; while older
/// transactions are open it builds as CONCURRENTLY does, see
/// [`Db::create_index`]), and a CONCURRENTLY build lets them go on
/// ([`Db::create_index_online`]); either stops with 57014 when `cancel`
/// is set.
pub fn create_index(
    db: &Db,
    c: &ast::CreateIndex,
    cancel: &std::sync::atomic::AtomicBool,
) -> SqlResult<Output> {
    let table = table_name(&c.table_name)?;
    let t = db.table(&table).map_err(|_| no_table(&table))?;
    let schema = t.schema();
    let columns = index_columns(&c.columns, &schema.def)?;
    let name = match &c.name {
        Some(n) => table_name(n)?,
        None => {
            let cols: Vec<&str> = columns
                .iter()
                .filter_map(|&i| schema.def.columns.get(i).map(|c| c.name.as_str()))
                .collect();
            format!("{table}_{}_idx", cols.join("_"))
        }
    };
    if c.predicate.is_some() || !c.include.is_empty() {
        return Err(SqlError::unsupported("partial or covering indexes"));
    }
    // Index names are unique per schema, as in PostgreSQL.
    let taken = db
        .tables()
        .iter()
        .any(|s| s.def.name == name || s.index_position(&name).is_some());
    if taken {
        if c.if_not_exists {
            return Ok(Output::tag("CREATE INDEX"));
        }
        return Err(SqlError::new(
            SqlState::DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    let index = IndexDef {
        name,
        columns,
        unique: c.unique,
    };
    if c.concurrently {
        db.create_index_online(&table, index, Some(cancel))?;
    } else {
        db.create_index_cancelable(&table, index, Some(cancel))?;
    }
    Ok(Output::tag("CREATE INDEX"))
}

/// `DROP INDEX [IF EXISTS] name [, ...]`: index names are unique per
/// schema, so each names one table's index; every name is checked before
/// any index is dropped. A primary key's or UNIQUE constraint's index
/// (`t_pkey`) cannot be dropped alone.
pub fn drop_indexes(db: &Db, names: &[ast::ObjectName], if_exists: bool) -> SqlResult<Output> {
    let names: Vec<String> = names.iter().map(table_name).collect::<SqlResult<_>>()?;
    let mut targets = Vec::new();
    for n in &names {
        let owner = db
            .tables()
            .into_iter()
            .find(|s| s.index_position(n).is_some());
        match owner {
            Some(s) => targets.push((s.def.name.clone(), n.clone())),
            None if db
                .tables()
                .iter()
                .any(|s| format!("{}_pkey", s.def.name) == *n) =>
            {
                return Err(SqlError::new(
                    SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                    format!("cannot drop index {n} because the primary key requires it"),
                ));
            }
            None if if_exists => {}
            None => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!("index \"{n}\" does not exist"),
                ));
            }
        }
    }
    for (table, index) in targets {
        db.drop_index(&table, &index)?;
    }
    Ok(Output::tag("DROP INDEX"))
}
