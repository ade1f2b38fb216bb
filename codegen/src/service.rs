//! The Rust emitter's service part ([`crate::Config::service`]): for the method union and for
//! each side's methods, a service trait (one async method per method: typed params in, typed
//! result or `RpcError` out, the call's `Context` given), the exhaustive dispatch from the
//! generated method enums into it as an `openagents_rpc::Handler`, and a typed client over an
//! `openagents_rpc::Transport`. Emitted into a module `service` beside the types; nothing of it
//! without the option, so the generated code names `openagents-rpc` only when asked.
//!
//! ```text
//! service::Service, ServiceHandler<S>, Client, decode, dispatch     (the method union)
//! service::error, service::error_code                                (the error-code enum)
//! service::<side>_side::{Service, ServiceHandler<S>, Client,         (each x-side side)
//!     dispatch, dispatch_request, dispatch_notification}
//! <side>_side::Notification::send(&Peer)                             (a side's notifications)
//! ```

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{Emitter, doc, doc_safe, field_idents, type_ident};
use crate::error::SchemaError;
use crate::model::{Repr, TypeKind};

/// Names of the items each service module defines: a schema type of one of these names would be
/// hidden inside the module, so it is refused. The modules import nothing else by name (the JSON
/// text type is written `serde_json::value::RawValue`), so no other schema type is hidden there.
const ITEMS: &[&str] = &["Service", "ServiceHandler", "Client"];
/// Method names the client's own functions take.
const CLIENT_RESERVED: &[&str] = &["new", "from_arc", "transport"];

/// One method of a service, as the emitters below need it.
struct Call {
    /// The name on the wire.
    wire: String,
    /// The trait's and the client's function name.
    ident: proc_macro2::Ident,
    /// What the trait documents.
    doc: TokenStream,
    /// The params type as the trait takes it.
    params_ty: TokenStream,
    /// The result type; `None` for a notification.
    result_ty: Option<TokenStream>,
    /// How the client decodes the raw result `__raw` (a `Result<_, ClientError>` expression).
    decode_result: TokenStream,
    /// How the client encodes `params` into `Option<Box<RawValue>>`.
    encode_params: TokenStream,
}

impl Emitter<'_> {
    /// The `service` module (see the module documentation); `rpc` is the path of the
    /// `openagents-rpc` crate.
    pub(super) fn service(&self, rpc: &str) -> Result<TokenStream, SchemaError> {
        if self.space.methods.is_none() && self.space.sides.is_empty() {
            return Ok(quote!());
        }
        let rpc: TokenStream = rpc.parse().map_err(|e| SchemaError::new("", "", "service", format!("bad openagents-rpc path: {e}")))?;
        if let Some(t) = self.space.types.values().find(|t| ITEMS.contains(&t.name.as_str())) {
            let what = format!("the generated service module defines `{}`, which would hide this type there; rename the type (its `$defs` key or `title`) to generate a service", t.name);
            return Err(SchemaError::new(&t.origin.file, &t.origin.pointer, "service", what));
        }
        let rt = &self.rt;
        let mut items = Vec::new();
        items.push(quote! {
            #[allow(unused_imports)]
            use super::*;

            /// A params document that broke its schema, as -32602 with every violation (pointers
            /// from the request: `/params/...`); params the JSON parser cannot read (a lone
            /// surrogate, a number out of range, nesting past its limit), as -32700.
            #[allow(dead_code)]
            fn invalid(e: #rt::DocumentError) -> #rpc::RpcError {
                match e {
                    #rt::DocumentError::Invalid(v) => #rpc::RpcError::invalid_params_violations(v.into_iter().map(|v| (format!("/params{}", v.pointer), v.keyword, v.message))),
                    #rt::DocumentError::NotJson(m) => #rpc::RpcError::parse_error(m),
                }
            }

            /// A result as raw JSON.
            #[allow(dead_code)]
            fn encode<T: serde::Serialize>(value: &T) -> Result<Box<serde_json::value::RawValue>, #rpc::RpcError> {
                serde_json::value::to_raw_value(value).map_err(#rpc::RpcError::internal)
            }

            /// A result as JSON at the end of `out` (nothing left there when it cannot be
            /// encoded): what a reply holds, with no raw value of its own.
            #[allow(dead_code)]
            fn encode_into<T: serde::Serialize>(value: &T, out: &mut Vec<u8>) -> Result<(), #rpc::RpcError> {
                let start = out.len();
                serde_json::to_writer(&mut *out, value).map_err(|e| {
                    out.truncate(start);
                    #rpc::RpcError::internal(e)
                })
            }

            /// Params as raw JSON for a request.
            #[allow(dead_code)]
            fn encode_params<T: serde::Serialize>(value: &T) -> Result<Option<Box<serde_json::value::RawValue>>, #rpc::ClientError> {
                serde_json::value::to_raw_value(value).map(Some).map_err(|e| #rpc::ClientError::Decode(format!("the params cannot be encoded: {e}")))
            }

            /// A result that broke its schema.
            #[allow(dead_code)]
            fn bad_result(method: &str, e: impl std::fmt::Display) -> #rpc::ClientError {
                #rpc::ClientError::Decode(format!("the result of `{method}`: {e}"))
            }
        });
        if let Some(errors) = &self.space.errors {
            let code = type_ident(&errors.enum_name);
            // With a carrier (`{code, message, …}`), the data is one: the code, the message, and
            // `retryable` when the carrier has it (the code knows it).
            let carrier = errors.carrier.as_ref().and_then(|c| match self.space.types.get(c).map(|t| &t.kind) {
                Some(TypeKind::Struct(st)) => Some((c, st)),
                _ => None,
            });
            let (data, d) = match carrier {
                Some((name, st)) => {
                    let retryable = st.fields.iter().any(|f| f.name == "retryable");
                    let data = if retryable {
                        quote!(serde_json::json!({"code": code.as_str(), "message": message, "retryable": code.retryable()}))
                    } else {
                        quote!(serde_json::json!({"code": code.as_str(), "message": message}))
                    };
                    let fields = if retryable { "`code`, `message` and `retryable`" } else { "`code` and `message`" };
                    (data, format!(" An error of code `{}` as the JSON-RPC error object: its `rpc_code`, `message`, and as `data` a [`{}`] of its {fields} (for its other members, [`error_from`]).", doc_safe(&errors.enum_name), doc_safe(name)))
                }
                None => (quote!(), format!(" An error of code `{}` as the JSON-RPC error object: its `rpc_code`, `message`, and `data: {{\"code\": \"<the code>\"}}`.", doc_safe(&errors.enum_name))),
            };
            let body = if carrier.is_some() {
                quote!(let message = message.into(); #rpc::RpcError::new(code.rpc_code(), message.clone()).with_data(#data))
            } else {
                quote!(#rpc::RpcError::new(code.rpc_code(), message).with_data(serde_json::json!({"code": code.as_str()})))
            };
            if let Some((name, st)) = carrier {
                let required = |n: &str| st.fields.iter().any(|f| f.name == n && f.required && !matches!(f.node.repr, Repr::Nullable(_)));
                if required("code") && required("message") {
                    let names: Vec<&str> = st.fields.iter().map(|f| f.name.as_str()).collect();
                    let reserved: &[&str] = if matches!(st.additional, crate::model::Additional::Schema(_)) { &["additional"] } else { &[] };
                    let idents = field_idents(&names, reserved);
                    let ident = |n: &str| names.iter().position(|x| *x == n).map(|i| idents[i].clone());
                    let (c, m) = (ident("code"), ident("message"));
                    let ty = type_ident(name);
                    let fd = format!(" The error a [`{}`] stands for: its code's `rpc_code`, its `message`, and the whole object as `data`.", doc_safe(name));
                    items.push(quote! {
                        #[doc = #fd]
                        pub fn error_from(error: &#ty) -> #rpc::RpcError {
                            let e = #rpc::RpcError::new(error.#c.rpc_code(), error.#m.clone());
                            match serde_json::to_value(error) {
                                Ok(data) => e.with_data(data),
                                Err(_) => e,
                            }
                        }
                    });
                }
            }
            items.push(quote! {
                #[doc = #d]
                pub fn error(code: #code, message: impl Into<String>) -> #rpc::RpcError {
                    #body
                }
                /// The code of an error made by [`error`] (`data.code`), when it is one.
                pub fn error_code(e: &#rpc::RpcError) -> Option<#code> {
                    let s = e.data.as_ref()?.get("code")?.as_str()?;
                    #code::from_wire::<serde::de::value::Error>(s).ok()
                }
            });
        }
        if let Some(calls) = self.union_calls()? {
            items.push(self.union_service(&rpc, &calls));
        }
        for side in &self.space.sides {
            items.push(self.side_service(&rpc, side));
        }
        Ok(quote! {
            /// Typed service traits, their dispatch as `openagents_rpc` handlers, and typed clients.
            #[allow(clippy::all)]
            pub mod service {
                #(#items)*
            }
        })
    }

    /// How the client decodes `__raw` as `name` (a generated type).
    fn decode_named(&self, name: &str, wire: &str) -> TokenStream {
        let rt = &self.rt;
        let id = type_ident(name);
        if self.is_alias(name) {
            let (v, c) = self.check_fn_names(name);
            quote!(#rt::parse_validated_with::<#id>(__raw.get().as_bytes(), #v, #c).map_err(|e| bad_result(#wire, e)))
        } else {
            quote!(#rt::parse_validated::<#id>(__raw.get().as_bytes()).map_err(|e| bad_result(#wire, e)))
        }
    }

    /// The method union's calls, or `None` without one.
    fn union_calls(&self) -> Result<Option<Vec<Call>>, SchemaError> {
        let Some(ms) = &self.space.methods else { return Ok(None) };
        let Some(t) = self.space.types.get(&ms.union) else { return Ok(None) };
        let TypeKind::Union(u) = &t.kind else { return Ok(None) };
        let names: Vec<&str> = u.variants.iter().map(|v| v.tag_value.as_str()).collect();
        let idents = field_idents(&names, CLIENT_RESERVED);
        let mut out = Vec::new();
        for (v, ident) in u.variants.iter().zip(idents) {
            let Some(p) = v.fields.iter().find(|f| f.name == ms.params_field) else { continue };
            let optional = !p.required || matches!(p.node.repr, Repr::Nullable(_));
            let inner = match &p.node.repr {
                Repr::Nullable(r) => r.as_ref(),
                r => r,
            };
            if !matches!(inner, Repr::Named(_)) {
                let what = format!("a service needs a named params type for `{}`: make `params` a `$ref` to a `$defs` object", v.tag_value);
                return Err(SchemaError::new(&v.origin.file, &v.origin.pointer, "service", what));
            }
            let r = self.rust_ty(&ms.union, &p.node.repr);
            let params_ty = if p.required || matches!(p.node.repr, Repr::Nullable(_)) { r } else { quote!(Option<#r>) };
            let wire = v.tag_value.clone();
            // A named result is decoded and checked against its schema; any other shape (a list, a
            // string, an object of any members) is decoded exactly by its `Wire` decoder.
            let rt = &self.rt;
            let exact = |ty: &TokenStream| quote!({
                let mut __de = serde_json::Deserializer::from_str(__raw.get());
                <#ty as #rt::Wire>::decode(&mut __de).and_then(|v| __de.end().map(|()| v)).map_err(|e| bad_result(#wire, e))
            });
            let (result_ty, decode_result) = match &v.result {
                Some(n) => match &n.repr {
                    Repr::Named(name) => (self.rust_ty("", &n.repr), self.decode_named(name, &wire)),
                    other => {
                        let ty = self.rust_ty("", other);
                        let dec = exact(&ty);
                        (ty, dec)
                    }
                },
                None => (quote!(serde_json::Value), exact(&quote!(serde_json::Value))),
            };
            let encode_params = if optional { quote!(match &params { Some(p) => encode_params(p)?, None => None }) } else { quote!(encode_params(&params)?) };
            let d = doc(v.description.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or(&format!("`{wire}`.")));
            out.push(Call { wire, ident, doc: d, params_ty, result_ty: Some(result_ty), decode_result, encode_params });
        }
        Ok(Some(out))
    }

    /// The method union's trait, decode, dispatch, handler and client.
    fn union_service(&self, rpc: &TokenStream, calls: &[Call]) -> TokenStream {
        let rt = &self.rt;
        let Some(ms) = &self.space.methods else { return quote!() };
        let Some(TypeKind::Union(u)) = self.space.types.get(&ms.union).map(|t| &t.kind) else { return quote!() };
        let mut fns = Vec::new();
        let mut decode_arms = Vec::new();
        let mut dispatch_arms = Vec::new();
        let mut dispatch_into_arms = Vec::new();
        for (c, v) in calls.iter().zip(u.variants.iter().filter(|v| v.fields.iter().any(|f| f.name == ms.params_field))) {
            let (ident, d, pty, wire) = (&c.ident, &c.doc, &c.params_ty, &c.wire);
            let rty = c.result_ty.clone().unwrap_or(quote!(()));
            fns.push(quote!(#d fn #ident(&self, cx: &#rpc::Context, params: #pty) -> impl std::future::Future<Output = Result<#rty, #rpc::RpcError>> + Send;));
            let vid = type_ident(&v.name);
            let p = v.fields.iter().find(|f| f.name == ms.params_field).expect("filtered above");
            let optional = !p.required || matches!(p.node.repr, Repr::Nullable(_));
            let name = match &p.node.repr {
                Repr::Nullable(r) => match r.as_ref() {
                    Repr::Named(n) => n.clone(),
                    _ => continue,
                },
                Repr::Named(n) => n.clone(),
                _ => continue,
            };
            let target = match &p.node.repr {
                Repr::Nullable(r) => self.rust_ty(&ms.union, r),
                r => self.rust_ty(&ms.union, r),
            };
            let dec = if self.is_alias(&name) {
                let (vf, cf) = self.check_fn_names(&name);
                quote!(#rt::parse_params_with::<#target>(__p.get(), #vf, #cf).map_err(invalid)?)
            } else {
                quote!(#rt::parse_params::<#target>(__p.get()).map_err(invalid)?)
            };
            let nullable = matches!(p.node.repr, Repr::Nullable(_));
            let value = if nullable {
                // `"params": null` where the schema takes null: no params.
                quote!(match params { Some(__p) if __p.get() == "null" => None, Some(__p) => Some(#dec), None => None })
            } else if optional {
                quote!(match params { Some(__p) => Some(#dec), None => None })
            } else {
                let missing = format!("`{wire}` takes params; the request has none");
                quote!(match params { Some(__p) => #dec, None => return Err(#rpc::RpcError::invalid_params(#missing)) })
            };
            decode_arms.push(quote!(#wire => Method::#vid(#value),));
            dispatch_arms.push(quote!(Method::#vid(p) => encode(&service.#ident(cx, p).await?),));
            dispatch_into_arms.push(quote!(Method::#vid(p) => encode_into(&service.#ident(cx, p).await?, out),));
        }
        let client = self.client(rpc, calls, quote!(Client));
        quote! {
            /// The service: one function per method of the method union. Implement it, wrap it
            /// in a [`ServiceHandler`], and serve that with `openagents_rpc::RpcServer`.
            pub trait Service: Send + Sync + 'static {
                #(#fns)*
            }

            /// Decodes a call into [`Method`]: -32601 for a name that is no method, -32602 for
            /// params that break their schema (every violation, pointers from `/params`).
            ///
            /// # Errors
            ///
            /// As above.
            pub fn decode(method: &str, params: Option<&serde_json::value::RawValue>) -> Result<Method, #rpc::RpcError> {
                Ok(match method {
                    #(#decode_arms)*
                    other => return Err(#rpc::RpcError::method_not_found_among(other, Method::NAMES)),
                })
            }

            /// Calls `service` for `method`: one exhaustive `match` over [`Method`], so a method
            /// added to the schema stops every service that lacks it from compiling.
            ///
            /// # Errors
            ///
            /// The service's error, or -32603 when its result cannot be encoded.
            pub async fn dispatch<S: Service + ?Sized>(service: &S, cx: &#rpc::Context, method: Method) -> Result<Box<serde_json::value::RawValue>, #rpc::RpcError> {
                match method {
                    #(#dispatch_arms)*
                }
            }

            /// [`dispatch`] with the result written as JSON at the end of `out` (what the
            /// handler's `call_into` runs: the server encodes it straight into the reply).
            ///
            /// # Errors
            ///
            /// As [`dispatch`].
            pub async fn dispatch_into<S: Service + ?Sized>(service: &S, cx: &#rpc::Context, method: Method, out: &mut Vec<u8>) -> Result<(), #rpc::RpcError> {
                match method {
                    #(#dispatch_into_arms)*
                }
            }

            /// A [`Service`] as an `openagents_rpc::Handler`: [`decode`], then [`dispatch`]
            /// ([`dispatch_into`] when the server writes the result into its reply).
            pub struct ServiceHandler<S>(pub std::sync::Arc<S>);

            impl<S: Service> ServiceHandler<S> {
                /// The handler of `service`.
                pub fn new(service: S) -> Self {
                    ServiceHandler(std::sync::Arc::new(service))
                }
            }

            impl<S: Service> #rpc::Handler for ServiceHandler<S> {
                fn call<'a>(&'a self, cx: &'a #rpc::Context, method: &'a str, params: Option<&'a serde_json::value::RawValue>) -> #rpc::BoxFuture<'a, Result<Box<serde_json::value::RawValue>, #rpc::RpcError>> {
                    Box::pin(async move { dispatch(&*self.0, cx, decode(method, params)?).await })
                }

                fn call_into<'a>(&'a self, cx: &'a #rpc::Context, method: &'a str, params: Option<&'a serde_json::value::RawValue>, out: &'a mut Vec<u8>) -> Option<#rpc::BoxFuture<'a, Result<(), #rpc::RpcError>>> {
                    Some(Box::pin(async move { dispatch_into(&*self.0, cx, decode(method, params)?, out).await }))
                }
            }

            #client
        }
    }

    /// A typed client named `name` over `calls`.
    fn client(&self, rpc: &TokenStream, calls: &[Call], name: TokenStream) -> TokenStream {
        let fns = calls.iter().map(|c| {
            let (ident, d, pty, wire, enc) = (&c.ident, &c.doc, &c.params_ty, &c.wire, &c.encode_params);
            match &c.result_ty {
                Some(rty) => {
                    let dec = &c.decode_result;
                    quote!(
                        #d
                        ///
                        /// # Errors
                        ///
                        /// The server's error (`ClientError::Rpc`), the transport's, or a result
                        /// that breaks its schema (`ClientError::Decode`).
                        pub async fn #ident(&self, params: #pty) -> Result<#rty, #rpc::ClientError> {
                            let __raw = self.transport.call(#wire, #enc).await?;
                            #dec
                        }
                    )
                }
                None => quote!(
                    #d
                    ///
                    /// # Errors
                    ///
                    /// The transport's.
                    pub async fn #ident(&self, params: #pty) -> Result<(), #rpc::ClientError> {
                        self.transport.notify(#wire, #enc).await
                    }
                ),
            }
        });
        quote! {
            /// A typed client: one function per method, over any `openagents_rpc::Transport`
            /// (`LineTransport`, `HttpTransport`, `WsTransport`). Results are decoded and checked
            /// against their schema.
            #[derive(Clone)]
            pub struct #name {
                transport: std::sync::Arc<dyn #rpc::Transport>,
            }

            impl #name {
                /// A client over `transport`.
                pub fn new(transport: impl #rpc::Transport) -> Self {
                    Self { transport: std::sync::Arc::new(transport) }
                }
                /// A client over a shared transport.
                pub fn from_arc(transport: std::sync::Arc<dyn #rpc::Transport>) -> Self {
                    Self { transport }
                }
                /// Its transport.
                pub fn transport(&self) -> &std::sync::Arc<dyn #rpc::Transport> {
                    &self.transport
                }
                #(#fns)*
            }
        }
    }

    /// One side's module: its trait, handler and client, and `send` on its notifications.
    fn side_service(&self, rpc: &TokenStream, side: &crate::model::Side) -> TokenStream {
        let module = format_ident!("{}_side", heck::ToSnakeCase::to_snake_case(crate::naming::pascal(&side.name, "Other").as_str()));
        // The side's enums, from inside `service::<side>_side` (where `<side>_side` is this module).
        let enums = quote!(super::super::#module);
        let all: Vec<&crate::model::MarkedMethod> = side.requests.iter().chain(&side.notifications).collect();
        let names: Vec<&str> = all.iter().map(|m| m.method.as_str()).collect();
        let idents = field_idents(&names, CLIENT_RESERVED);
        let mut calls = Vec::new();
        let mut fns = Vec::new();
        let mut request_arms = Vec::new();
        let mut notification_arms = Vec::new();
        let mut send_arms = Vec::new();
        let mut try_send_arms = Vec::new();
        for (m, ident) in all.iter().zip(idents) {
            let pid = type_ident(&m.params);
            let vid = type_ident(&m.variant);
            let wire = m.method.clone();
            let d = doc(m.description.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or(&format!("`{wire}`.")));
            match &m.result {
                Some(r) => {
                    let rid = type_ident(r);
                    fns.push(quote!(#d fn #ident(&self, cx: &#rpc::Context, params: #pid) -> impl std::future::Future<Output = Result<#rid, #rpc::RpcError>> + Send;));
                    request_arms.push(quote!(#enums::Request::#vid(p) => encode(&service.#ident(cx, p).await?),));
                    calls.push(Call { wire: wire.clone(), ident: ident.clone(), doc: d, params_ty: quote!(#pid), result_ty: Some(quote!(#rid)), decode_result: self.decode_named(r, &wire), encode_params: quote!(encode_params(&params)?) });
                }
                None => {
                    let nd = " A notification: its answer, if the caller asked for one, is `null`; the default does nothing.";
                    fns.push(quote!(#d #[doc = ""] #[doc = #nd] fn #ident(&self, cx: &#rpc::Context, params: #pid) -> impl std::future::Future<Output = ()> + Send { let _ = (cx, params); async {} }));
                    notification_arms.push(quote!(#enums::Notification::#vid(p) => service.#ident(cx, p).await,));
                    send_arms.push(quote!(super::#module::Notification::#vid(p) => peer.notify(#wire, p).await,));
                    try_send_arms.push(quote!(super::#module::Notification::#vid(p) => peer.try_notify(#wire, p),));
                    calls.push(Call { wire: wire.clone(), ident: ident.clone(), doc: d, params_ty: quote!(#pid), result_ty: None, decode_result: quote!(), encode_params: quote!(encode_params(&params)?) });
                }
            }
        }
        let sdoc = format!(" The `{}` side's methods (`x-side: \"{}\"`) as a service, its handler and its client.", doc_safe(&side.name), doc_safe(&side.name));
        let (request_dispatch, request_fn) = if request_arms.is_empty() {
            (quote!(), quote!())
        } else {
            (
                quote!(if let Some(r) = #enums::Request::decode(method, bytes) {
                    return dispatch_request(service, cx, r.map_err(invalid)?).await;
                }),
                quote!(
                    /// Calls `service` for a request already decoded (by the side's
                    /// `Request::decode`, or by the caller's own checks first): one exhaustive
                    /// `match`, the result encoded.
                    ///
                    /// # Errors
                    ///
                    /// The service's error, or -32603 when its result cannot be encoded.
                    pub async fn dispatch_request<S: Service + ?Sized>(service: &S, cx: &#rpc::Context, request: #enums::Request) -> Result<Box<serde_json::value::RawValue>, #rpc::RpcError> {
                        match request { #(#request_arms)* }
                    }
                ),
            )
        };
        let (notification_dispatch, notification_fn) = if notification_arms.is_empty() {
            (quote!(), quote!())
        } else {
            (
                quote!(if let Some(n) = #enums::Notification::decode(method, bytes) {
                    dispatch_notification(service, cx, n.map_err(invalid)?).await;
                    return Ok(#rpc::null());
                }),
                quote!(
                    /// Calls `service` for a notification already decoded: one exhaustive `match`.
                    pub async fn dispatch_notification<S: Service + ?Sized>(service: &S, cx: &#rpc::Context, notification: #enums::Notification) {
                        match notification { #(#notification_arms)* }
                    }
                ),
            )
        };
        let known: Vec<TokenStream> = [(!side.requests.is_empty()).then(|| quote!(#enums::Request::METHODS)), (!side.notifications.is_empty()).then(|| quote!(#enums::Notification::METHODS))].into_iter().flatten().collect();
        let send = if send_arms.is_empty() {
            quote!()
        } else {
            let d = format!(" Sends this notification to a caller of the other side (`{}`'s notifications are sent to it).", doc_safe(&side.name));
            quote!(
                impl super::#module::Notification {
                    #[doc = #d]
                    ///
                    /// # Errors
                    ///
                    /// The peer's: its transport cannot, or its connection is closed.
                    ///
                    /// It waits for room in the peer's outbound queue as long as the peer takes to
                    /// read: for the caller of the call that sends it. To tell other connections
                    /// (watchers, subscribers), use [`Self::try_send`], which never waits.
                    pub async fn send(&self, peer: &#rpc::Peer) -> Result<(), #rpc::PeerError> {
                        match self { #(#send_arms)* }
                    }

                    /// [`Self::send`] without waiting: a peer that stopped reading
                    /// ([`PeerError::Full`](#rpc::PeerError::Full)) does not get it, and no other
                    /// call waits for that peer.
                    ///
                    /// # Errors
                    ///
                    /// The peer's: its transport cannot, its connection is closed, or its queue is full.
                    pub fn try_send(&self, peer: &#rpc::Peer) -> Result<(), #rpc::PeerError> {
                        match self { #(#try_send_arms)* }
                    }
                }
            )
        };
        let client = self.client(rpc, &calls, quote!(Client));
        quote! {
            #[doc = #sdoc]
            pub mod #module {
                #[allow(unused_imports)]
                use super::*;

                /// One function per method this side handles: requests answer a result,
                /// notifications nothing.
                pub trait Service: Send + Sync + 'static {
                    #(#fns)*
                }

                /// Calls `service` for one call: decoded by the side's `Request` and
                /// `Notification` enums, then one exhaustive `match`.
                ///
                /// # Errors
                ///
                /// -32601 for a method this side does not handle, -32602 for params that break
                /// their schema, or the service's error.
                pub async fn dispatch<S: Service + ?Sized>(service: &S, cx: &#rpc::Context, method: &str, params: Option<&serde_json::value::RawValue>) -> Result<Box<serde_json::value::RawValue>, #rpc::RpcError> {
                    let bytes = params.map_or(&b"{}"[..], |p| p.get().as_bytes());
                    #request_dispatch
                    #notification_dispatch
                    let known: Vec<&str> = [#(#known),*].concat();
                    let _ = (service, cx, bytes);
                    Err(#rpc::RpcError::method_not_found_among(method, &known))
                }

                #request_fn
                #notification_fn

                /// A [`Service`] as an `openagents_rpc::Handler`.
                pub struct ServiceHandler<S>(pub std::sync::Arc<S>);

                impl<S: Service> ServiceHandler<S> {
                    /// The handler of `service`.
                    pub fn new(service: S) -> Self {
                        ServiceHandler(std::sync::Arc::new(service))
                    }
                }

                impl<S: Service> #rpc::Handler for ServiceHandler<S> {
                    fn call<'a>(&'a self, cx: &'a #rpc::Context, method: &'a str, params: Option<&'a serde_json::value::RawValue>) -> #rpc::BoxFuture<'a, Result<Box<serde_json::value::RawValue>, #rpc::RpcError>> {
                        Box::pin(dispatch(&*self.0, cx, method, params))
                    }
                }

                #client
            }

            #send
        }
    }
}
