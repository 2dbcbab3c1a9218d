//! Rust data as Python objects (dicts, lists, ints, floats, str, bool, None), built directly from
//! the value's own `Serialize`, as pythonize does: no JSON text between Rust and Python, no
//! `json.loads`, and a struct's fields keep the order they are written in (the order of the JSON
//! form). The objects are the ones `json.loads` would give for the value's JSON text: a float
//! that JSON cannot write (NaN, ∞) is None, a map's keys are strings, an enum's unit variant is
//! its name, and a `serde_json::Number` (kept exactly, `arbitrary_precision`) is an int or a float
//! as its text reads.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

use pyo3::exceptions::PyValueError;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use serde::Serialize;
use serde::ser::{self, Impossible};

/// How serde_json writes a `Number` under `arbitrary_precision`: a struct of this name whose one
/// field is the number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// `value` as the Python objects of its JSON form.
pub fn to_py<'py, T: Serialize + ?Sized>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    value.serialize(ToPy { py }).map_err(|e| e.0)
}

/// A JSON value (the CUDA reports of `crates/python/src/binding/cuda.rs`) as Python objects.
pub fn json_to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, value)
}

/// The JSON form's `data` as a dict with the envelope's `schema` (`gpushare.<kind>/<N>`) added as
/// its last key, so a `to_dict()` still says which schema it follows.
pub fn dict_with_schema<'py, T: Serialize + ?Sized>(py: Python<'py>, kind: &str, data: &T) -> PyResult<Bound<'py, PyAny>> {
    let dict = to_py(py, data)?;
    dict.set_item("schema", crate::schema::schema_id(kind))?;
    Ok(dict)
}

/// The `application/vnd.gpushare+json` payload as Python objects: `{"data": …, "schema": …}`, the
/// keys in the order of the envelope's text.
pub fn envelope_to_py<'py, T: Serialize + ?Sized>(py: Python<'py>, kind: &str, data: &T) -> PyResult<Bound<'py, PyAny>> {
    let envelope = PyDict::new(py);
    envelope.set_item("data", to_py(py, data)?)?;
    envelope.set_item("schema", crate::schema::schema_id(kind))?;
    Ok(envelope.into_any())
}

/// What every result hands Jupyter: its text, its HTML and its JSON envelope, so a notebook
/// front end picks the richest form it can show and a reader of the saved file gets the data.
pub fn mime_bundle<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    kind: &str,
    data: &T,
    text: String,
    html: String,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item("text/plain", text)?;
    d.set_item("text/html", html)?;
    d.set_item(crate::report::MIME_TYPE, envelope_to_py(py, kind, data)?)?;
    Ok(d)
}

/// The `application/vnd.gpushare+json` payload as JSON text, for `to_json()`: the one place a
/// result is written as text, for users who save or send it.
pub fn envelope_json<T: Serialize + ?Sized>(kind: &str, data: &T) -> PyResult<String> {
    crate::report::envelope_text(kind, data).map_err(|e| pyo3::exceptions::PyTypeError::new_err(e.to_string()))
}

struct Error(PyErr);

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        Error(PyValueError::new_err(msg.to_string()))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error(e)
    }
}

type Result<T> = std::result::Result<T, Error>;

#[derive(Clone, Copy)]
struct ToPy<'py> {
    py: Python<'py>,
}

impl<'py> ToPy<'py> {
    fn any<T: IntoPyObject<'py>>(self, value: T) -> Result<Bound<'py, PyAny>> {
        value.into_bound_py_any(self.py).map_err(Error)
    }

    /// A one-key dict `{variant: value}`: how JSON writes an enum's data-carrying variant.
    fn tagged(self, variant: &str, value: Bound<'py, PyAny>) -> Result<Bound<'py, PyAny>> {
        let dict = PyDict::new(self.py);
        dict.set_item(variant, value)?;
        Ok(dict.into_any())
    }

    /// A number written as text (`arbitrary_precision`): an int where it reads as one, of any
    /// size, else a float.
    fn number(self, text: &str) -> Result<Bound<'py, PyAny>> {
        if text.contains(['.', 'e', 'E']) {
            return self.any(text.parse::<f64>().map_err(<Error as ser::Error>::custom)?);
        }
        if let Ok(i) = text.parse::<i64>() {
            return self.any(i);
        }
        Ok(self.py.get_type::<pyo3::types::PyInt>().call1((text,))?)
    }
}

/// The serializer's integer methods, which differ only in their type.
macro_rules! integers {
    ($($method:ident: $ty:ty),*) => {
        $(fn $method(self, v: $ty) -> Result<Self::Ok> {
            self.any(v)
        })*
    };
}

impl<'py> ser::Serializer for ToPy<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Seq<'py>;
    type SerializeTuple = Seq<'py>;
    type SerializeTupleStruct = Seq<'py>;
    type SerializeTupleVariant = Seq<'py>;
    type SerializeMap = Map<'py>;
    type SerializeStruct = Struct<'py>;
    type SerializeStructVariant = Map<'py>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        Ok(PyBool::new(self.py, v).to_owned().into_any())
    }
    // Every integer becomes a Python int of the same value.
    integers!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64, serialize_i128: i128);
    integers!(serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64, serialize_u128: u128);
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        // JSON has no NaN or infinity: serde_json writes them as null.
        if v.is_finite() { Ok(PyFloat::new(self.py, v).into_any()) } else { self.serialize_none() }
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        self.serialize_str(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v).into_any())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok> {
        Ok(PyList::new(self.py, v)?.into_any())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<Self::Ok> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        self.tagged(variant, value.serialize(self)?)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq> {
        Ok(Seq { to: self, items: Vec::with_capacity(len.unwrap_or(0)), variant: None })
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Self::SerializeTupleStruct> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Ok(Seq { to: self, items: Vec::with_capacity(len), variant: Some(variant) })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Ok(Map { to: self, dict: PyDict::new(self.py), key: None, variant: None })
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Ok(if name == NUMBER_TOKEN {
            Struct::Number { to: self, value: None }
        } else {
            Struct::Fields(Map { to: self, dict: PyDict::new(self.py), key: None, variant: None })
        })
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Ok(Map { to: self, dict: PyDict::new(self.py), key: None, variant: Some(variant) })
    }
}

struct Seq<'py> {
    to: ToPy<'py>,
    items: Vec<Bound<'py, PyAny>>,
    variant: Option<&'static str>,
}

impl<'py> Seq<'py> {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.items.push(value.serialize(self.to)?);
        Ok(())
    }
    fn finish(self) -> Result<Bound<'py, PyAny>> {
        let list = PyList::new(self.to.py, self.items)?.into_any();
        match self.variant {
            Some(variant) => self.to.tagged(variant, list),
            None => Ok(list),
        }
    }
}

impl<'py> ser::SerializeSeq for Seq<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

impl<'py> ser::SerializeTuple for Seq<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

impl<'py> ser::SerializeTupleStruct for Seq<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

impl<'py> ser::SerializeTupleVariant for Seq<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

struct Map<'py> {
    to: ToPy<'py>,
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
    variant: Option<&'static str>,
}

thread_local! {
    /// The Python strings of struct field names, made once per name: a report has about a hundred
    /// fields, and making each key anew (allocating it, hashing it on insertion) was a fifth of
    /// turning one into a dict. Keyed by where serde's `&'static str` lies.
    static FIELD_NAMES: RefCell<HashMap<(usize, usize), Py<PyString>>> = RefCell::new(HashMap::new());
}

/// The interned Python string of a struct field's name.
fn field_name<'py>(py: Python<'py>, key: &'static str) -> Bound<'py, PyString> {
    FIELD_NAMES.with(|names| {
        names
            .borrow_mut()
            .entry((key.as_ptr() as usize, key.len()))
            .or_insert_with(|| PyString::intern(py, key).unbind())
            .bind(py)
            .clone()
    })
}

impl<'py> Map<'py> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.dict.set_item(field_name(self.to.py, key), value.serialize(self.to)?)?;
        Ok(())
    }
    fn finish(self) -> Result<Bound<'py, PyAny>> {
        match self.variant {
            Some(variant) => self.to.tagged(variant, self.dict.into_any()),
            None => Ok(self.dict.into_any()),
        }
    }
}

impl<'py> ser::SerializeMap for Map<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.key = Some(key.serialize(MapKey { py: self.to.py })?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self.key.take().ok_or_else(|| <Error as ser::Error>::custom("a map value before its key"))?;
        self.dict.set_item(key, value.serialize(self.to)?)?;
        Ok(())
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

impl<'py> ser::SerializeStructVariant for Map<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.field(key, value)
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

enum Struct<'py> {
    Fields(Map<'py>),
    /// A `serde_json::Number` under `arbitrary_precision`: its one field is its text.
    Number { to: ToPy<'py>, value: Option<Bound<'py, PyAny>> },
}

impl<'py> ser::SerializeStruct for Struct<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        match self {
            Struct::Fields(map) => map.field(key, value),
            Struct::Number { to, value: slot } => {
                let text: String = value.serialize(MapKey { py: to.py })?.extract()?;
                *slot = Some(to.number(&text)?);
                Ok(())
            }
        }
    }
    fn end(self) -> Result<Self::Ok> {
        match self {
            Struct::Fields(map) => map.finish(),
            Struct::Number { to, value } => value.map_or_else(|| ser::Serializer::serialize_none(to), Ok),
        }
    }
}

/// A map key as JSON writes it: a string (numbers and booleans as their JSON text).
struct MapKey<'py> {
    py: Python<'py>,
}

impl<'py> MapKey<'py> {
    fn text(self, text: impl AsRef<str>) -> Result<Bound<'py, PyAny>> {
        Ok(PyString::new(self.py, text.as_ref()).into_any())
    }
}

fn key_must_be_a_string() -> Error {
    <Error as ser::Error>::custom("a map key must be a string, a number or a boolean")
}

impl<'py> ser::Serializer for MapKey<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Impossible<Self::Ok, Error>;
    type SerializeTuple = Impossible<Self::Ok, Error>;
    type SerializeTupleStruct = Impossible<Self::Ok, Error>;
    type SerializeTupleVariant = Impossible<Self::Ok, Error>;
    type SerializeMap = Impossible<Self::Ok, Error>;
    type SerializeStruct = Impossible<Self::Ok, Error>;
    type SerializeStructVariant = Impossible<Self::Ok, Error>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        self.text(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        self.text(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        self.text(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<Self::Ok> {
        self.text(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(key_must_be_a_string())
    }
}
