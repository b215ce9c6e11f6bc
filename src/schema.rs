//! The columns of a multi-column readback: the schema that declares them, the typed handle of
//! each, and the binding of device buffers to them for one enqueue (checked by element type
//! before any driver call).
use crate::element::Element;
use crate::engine::tracked::{ErasedDevicePtr, NoBuffer, Typed};
use crate::error::{Error, Result};
use crate::layout::{COLUMN_ALIGN, MAX_COLUMNS};
use cudarc::driver::DevicePtr;
use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// One declared column: its element size and, for typed columns, its Rust type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Bytes per element.
    pub elem_size: usize,
    /// The element type's name, or `None` for a column declared by size only.
    pub type_name: Option<&'static str>,
    type_id: Option<TypeId>,
    /// The element type's alignment (1 for raw columns).
    align: usize,
}

/// The columns of a multi-column readback, in slot order. Build it with
/// [`ColumnSchema::column`] (typed) or [`ColumnSchema::raw_column`] (by element size).
///
/// A clone keeps the schema's identity: the handles of one are accepted by readbacks made
/// from the other. That is safe because every enqueue checks each bound buffer's element
/// type (typed columns) or size (raw columns) against the readback's own declaration of
/// that column, and every typed read checks the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSchema {
    id: u64,
    specs: Vec<ColumnSpec>,
}

impl Default for ColumnSchema {
    fn default() -> Self {
        Self::new()
    }
}

fn next_schema_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl ColumnSchema {
    /// A schema with no columns yet.
    pub fn new() -> Self {
        ColumnSchema {
            id: next_schema_id(),
            specs: Vec::new(),
        }
    }

    /// Adds a column of `T` and returns its typed handle. More than [`MAX_COLUMNS`] columns,
    /// or an element aligned to more than 16 bytes (which [`Element`]'s contract rules out),
    /// is reported as [`Error::InvalidConfig`] when the readback is created.
    pub fn column<T: Element>(&mut self) -> Column<T> {
        self.specs.push(ColumnSpec {
            elem_size: std::mem::size_of::<T>(),
            type_name: Some(std::any::type_name::<T>()),
            type_id: Some(TypeId::of::<T>()),
            align: std::mem::align_of::<T>(),
        });
        Column {
            index: self.specs.len() - 1,
            schema: self.id,
            _t: PhantomData,
        }
    }

    /// Adds a column of `elem_size`-byte elements with no Rust type (what the C API does);
    /// returns its index. Read it with [`crate::ColumnReadout::column_as`] (checked by size) or
    /// [`crate::ColumnReadout::column_bytes`].
    pub fn raw_column(&mut self, elem_size: usize) -> usize {
        self.specs.push(ColumnSpec {
            elem_size,
            type_name: None,
            type_id: None,
            align: 1,
        });
        self.specs.len() - 1
    }

    /// The declared columns, in order.
    pub fn columns(&self) -> &[ColumnSpec] {
        &self.specs
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether no column is declared yet.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    pub(crate) fn elem_sizes(&self) -> Vec<usize> {
        self.specs.iter().map(|s| s.elem_size).collect()
    }

    /// Errors unless the schema can be laid out: 1 to [`MAX_COLUMNS`] columns, none of an
    /// element type aligned to more than [`COLUMN_ALIGN`] (16) bytes, since each column
    /// starts at a multiple of 16 bytes in the slot. (Element sizes are checked with the
    /// capacity, by the slot layout.)
    pub(crate) fn validate(&self) -> Result<()> {
        if self.specs.is_empty() || self.specs.len() > MAX_COLUMNS {
            return Err(Error::config(format!(
                "a readback carries 1 to {MAX_COLUMNS} columns, the schema declares {}",
                self.specs.len()
            )));
        }
        if let Some((i, spec)) = self
            .specs
            .iter()
            .enumerate()
            .find(|(_, s)| s.align > COLUMN_ALIGN)
        {
            return Err(Error::config(format!(
                "column {i} holds {}, aligned to {} bytes: columns are {COLUMN_ALIGN}-byte aligned \
                 in the slot",
                spec.type_name.unwrap_or("untyped elements"),
                spec.align
            )));
        }
        Ok(())
    }

    /// Matches `sources` to the columns, by index: each column bound exactly once, by a
    /// handle of this schema (or a clone of it) whose element type is the column's declared
    /// type (for a raw column: whose element size is the declared size), so every buffer's
    /// length counts elements of the column's size. Pure host logic: runs before any driver
    /// call.
    fn bind<'s, 'a>(
        &self,
        sources: &'s [Source<'a>],
    ) -> Result<[Option<&'s Source<'a>>; MAX_COLUMNS]> {
        self.validate()?;
        let n = self.specs.len();
        let mut order: [Option<&Source<'_>>; MAX_COLUMNS] = [None; MAX_COLUMNS];
        for s in sources {
            if s.schema != self.id || s.column >= n {
                return Err(Error::schema(format!(
                    "a source was bound with the handle of column {} of another schema",
                    s.column
                )));
            }
            let spec = &self.specs[s.column];
            let fits = match spec.type_id {
                Some(id) => id == s.type_id,
                None => spec.elem_size == s.elem_size,
            };
            if !fits {
                return Err(Error::schema(format!(
                    "column {} holds {} ({} bytes), but its source holds {} ({} bytes)",
                    s.column,
                    spec.type_name.unwrap_or("untyped elements"),
                    spec.elem_size,
                    s.type_name,
                    s.elem_size
                )));
            }
            if order[s.column].replace(s).is_some() {
                return Err(Error::schema(format!("column {} is bound twice", s.column)));
            }
        }
        if let Some(missing) = (0..n).find(|&i| order[i].is_none()) {
            return Err(Error::schema(format!("column {missing} has no source")));
        }
        Ok(order)
    }

    /// [`Self::bind`], as the sources' type-erased buffers in column order (the first
    /// `self.len()` entries; the rest are placeholders).
    pub(crate) fn bind_erased<'s>(
        &self,
        sources: &'s [Source<'_>],
    ) -> Result<[&'s dyn ErasedDevicePtr; MAX_COLUMNS]> {
        let order = self.bind(sources)?;
        let mut erased: [&dyn ErasedDevicePtr; MAX_COLUMNS] = [&NoBuffer; MAX_COLUMNS];
        for (i, s) in order.iter().take(self.len()).enumerate() {
            erased[i] = &*s.expect("bind checked every column").data;
        }
        Ok(erased)
    }

    /// Errors unless `c` is the handle of a column of this schema (or of a clone of it).
    pub(crate) fn check_handle<T>(&self, c: Column<T>) -> Result<()> {
        if c.schema == self.id {
            Ok(())
        } else {
            Err(Error::schema(format!(
                "the handle of column {} belongs to another schema",
                c.index
            )))
        }
    }

    /// Checks that column `index` may be viewed as `[T]`.
    pub(crate) fn check_type<T: Element>(&self, index: usize) -> Result<()> {
        let spec = self.specs.get(index).ok_or_else(|| {
            Error::schema(format!(
                "column {index} does not exist: the readback has {} column(s)",
                self.specs.len()
            ))
        })?;
        let ok = match spec.type_id {
            Some(id) => id == TypeId::of::<T>(),
            None => {
                spec.elem_size == std::mem::size_of::<T>()
                    && std::mem::align_of::<T>() <= COLUMN_ALIGN
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Error::schema(format!(
                "column {index} holds {} ({} bytes), not {} ({} bytes)",
                spec.type_name.unwrap_or("untyped elements"),
                spec.elem_size,
                std::any::type_name::<T>(),
                std::mem::size_of::<T>()
            )))
        }
    }
}

/// The typed handle of one column, returned by [`ColumnSchema::column`]. `Copy`; use it to
/// bind the column's device buffer ([`Column::source`]) and to read it back
/// ([`crate::ColumnReadout::column`]).
#[derive(Debug)]
pub struct Column<T> {
    index: usize,
    schema: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Column<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Column<T> {}

impl<T: Element> Column<T> {
    /// The column's position in the slot (and in the schema).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Binds a device buffer of `T` (a `CudaSlice<T>` or view) as this column's source for
    /// one enqueue. Its length is the column's source length. The enqueue checks `T` against
    /// the readback's declaration of the column.
    pub fn source<'a, D: DevicePtr<T>>(&self, data: &'a D) -> Source<'a> {
        self.bound(Box::new(Typed(data, PhantomData)))
    }

    /// A source of this column's type over `data`, which holds elements of `T`.
    fn bound<'a>(&self, data: Box<dyn ErasedDevicePtr + 'a>) -> Source<'a> {
        Source {
            column: self.index,
            schema: self.schema,
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            elem_size: std::mem::size_of::<T>(),
            data,
        }
    }
}

/// A column's device buffer, bound for one [`crate::ColumnReadback::enqueue`] by [`Column::source`].
/// Carries the buffer's element type, which the enqueue checks against the column's.
pub struct Source<'a> {
    column: usize,
    schema: u64,
    type_id: TypeId,
    type_name: &'static str,
    elem_size: usize,
    data: Box<dyn ErasedDevicePtr + 'a>,
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("column", &self.column)
            .field("type", &self.type_name)
            .field("len", &self.data.len())
            .finish()
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<ColumnSchema>();
    send_sync::<Column<f64>>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::{CUcontext, CUdeviceptr};
    use cudarc::driver::{CudaStream, SyncOnDrop};

    #[test]
    fn handles_index_their_schema_in_order() {
        let mut s = ColumnSchema::new();
        let a = s.column::<f64>();
        let b = s.column::<[f32; 3]>();
        let c = s.raw_column(2);
        assert_eq!((a.index(), b.index(), c), (0, 1, 2));
        assert_eq!(s.elem_sizes(), vec![8, 12, 2]);
        assert_eq!(s.columns()[1].type_name, Some("[f32; 3]"));
        assert_eq!(s.columns()[2].type_name, None);
        assert!(s.validate().is_ok());
    }

    #[test]
    fn type_checks() {
        let mut s = ColumnSchema::new();
        s.column::<f64>();
        s.raw_column(4);
        assert!(s.check_type::<f64>(0).is_ok());
        assert!(s.check_type::<u64>(0).is_err(), "same size, other type");
        assert!(s.check_type::<i32>(1).is_ok());
        assert!(s.check_type::<f32>(1).is_ok(), "raw columns check the size");
        assert!(s.check_type::<u16>(1).is_err());
        assert!(s.check_type::<f64>(2).is_err(), "no such column");
    }

    #[test]
    fn schemas_with_no_or_too_many_columns_are_rejected() {
        assert!(ColumnSchema::new().validate().is_err());
        let mut s = ColumnSchema::new();
        for _ in 0..MAX_COLUMNS {
            s.column::<u8>();
        }
        assert!(s.validate().is_ok());
        s.column::<u8>();
        assert!(matches!(s.validate(), Err(Error::InvalidConfig { .. })));
    }

    #[test]
    fn each_schema_has_its_own_identity() {
        let (a, b) = (ColumnSchema::new(), ColumnSchema::new());
        assert_ne!(a.id, b.id);
        assert_eq!(a.clone().id, a.id);
    }

    /// A device buffer of `len` elements that only binding may touch (no driver call).
    struct HostOnly(usize);

    impl ErasedDevicePtr for HostOnly {
        fn len(&self) -> usize {
            self.0
        }
        fn context(&self) -> CUcontext {
            std::ptr::null_mut()
        }
        fn device_ptr<'s>(&'s self, _: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
            unreachable!("binding makes no driver call")
        }
    }

    fn src<T: Element>(c: Column<T>, len: usize) -> Source<'static> {
        c.bound(Box::new(HostOnly(len)))
    }

    fn bind_error(schema: &ColumnSchema, sources: &[Source<'_>]) -> String {
        match schema.bind(sources) {
            Ok(_) => panic!("{sources:?} accepted"),
            Err(e @ Error::SchemaMismatch { .. }) => e.to_string(),
            Err(e) => panic!("wrong error {e}"),
        }
    }

    #[test]
    fn binding_puts_sources_in_column_order() {
        let mut s = ColumnSchema::new();
        let a = s.column::<f64>();
        let b = s.column::<[u8; 3]>();
        let sources = [src(b, 7), src(a, 5)];
        let order = s.bind(&sources).unwrap();
        let lens: Vec<_> = order.iter().flatten().map(|s| s.data.len()).collect();
        assert_eq!(lens, [5, 7]);
        assert!(order[2..].iter().all(Option::is_none));
    }

    #[test]
    fn binding_rejects_missing_doubled_and_foreign_handles() {
        let mut s = ColumnSchema::new();
        let a = s.column::<f32>();
        let b = s.column::<i64>();
        let mut other = ColumnSchema::new();
        let z = other.column::<f32>();
        assert!(bind_error(&s, &[src(a, 4)]).contains("column 1 has no source"));
        assert!(bind_error(&s, &[src(a, 4), src(a, 4), src(b, 4)]).contains("bound twice"));
        assert!(bind_error(&s, &[src(z, 4), src(b, 4)]).contains("another schema"));
    }

    /// A clone shares the identity, so its handle for column 0 passes the identity check;
    /// the type check stops a u8 buffer from standing in for a column of 32-byte elements
    /// (the kernel would read 32 times its length).
    #[test]
    fn a_clones_handle_of_another_type_is_rejected_before_any_driver_call() {
        let mut a = ColumnSchema::new();
        let mut b = a.clone();
        a.column::<[f64; 4]>();
        let small = b.column::<u8>();
        let msg = bind_error(&a, &[src(small, 100)]);
        assert!(
            msg.contains("column 0 holds [f64; 4] (32 bytes)") && msg.contains("u8 (1 bytes)"),
            "{msg}"
        );
        // Same size, other type: rejected too (typed columns check the type).
        let mut c = ColumnSchema::new();
        let mut d = c.clone();
        c.column::<f64>();
        let as_u64 = d.column::<u64>();
        assert!(bind_error(&c, &[src(as_u64, 8)]).contains("holds f64"));
        // Same type through a clone: accepted (the clone is the same schema).
        let mut e = ColumnSchema::new();
        let x = e.column::<i32>();
        let f = e.clone();
        assert!(f.bind(&[src(x, 3)]).is_ok());
    }

    #[test]
    fn raw_columns_are_bound_by_element_size() {
        let mut a = ColumnSchema::new();
        let mut b = a.clone();
        a.raw_column(8);
        let mut c = b.clone();
        let same_size = b.column::<u64>();
        let smaller = c.column::<u32>();
        assert!(a.bind(&[src(same_size, 2)]).is_ok());
        let msg = bind_error(&a, &[src(smaller, 2)]);
        assert!(msg.contains("untyped elements (8 bytes)"), "{msg}");
    }

    /// Breaks `Element`'s alignment rule on purpose, to show the schema catches it. Never
    /// read back: the readback is refused.
    #[derive(Clone, Copy)]
    #[repr(C, align(32))]
    struct OverAligned([u8; 32]);
    // SAFETY: plain bytes, valid for any bits; the alignment above 16 violates the trait's
    // contract deliberately, and the test never views memory as this type.
    unsafe impl Element for OverAligned {}

    #[test]
    fn elements_aligned_above_16_bytes_are_rejected() {
        let mut s = ColumnSchema::new();
        s.column::<u128>();
        s.column::<[f32; 4]>();
        assert!(s.validate().is_ok(), "16-byte alignment is fine");
        s.column::<OverAligned>();
        match s.validate() {
            Err(Error::InvalidConfig { .. }) => {}
            other => panic!("over-aligned column accepted: {other:?}"),
        }
        assert!(s.validate().unwrap_err().to_string().contains("column 2"));
    }
}
