//! `coder_parameter` data sources become rich parameters; `coder_external_auth` data sources
//! become the external auth providers a template needs.

use std::collections::HashSet;

use codersdk::proto::{
    ExternalAuthProviderResource, ParameterFormType, RichParameter, RichParameterOption,
};

use super::ConvertError;
use super::attrs::Attrs;
use super::show::TfResource;

/// Parameters in declaration order (child modules first). Names must be unique.
pub(crate) fn collect(resources: &[TfResource]) -> Result<Vec<RichParameter>, ConvertError> {
    let parameters = resources
        .iter()
        .filter(|r| r.kind == "coder_parameter")
        .map(decode)
        .collect::<Result<Vec<_>, _>>()?;

    let mut seen = HashSet::new();
    let mut duplicated: Vec<String> = Vec::new();
    for parameter in &parameters {
        if !seen.insert(parameter.name.as_str()) && !duplicated.contains(&parameter.name) {
            duplicated.push(parameter.name.clone());
        }
    }
    if !duplicated.is_empty() {
        return Err(ConvertError::DuplicateParameterNames { names: duplicated });
    }
    Ok(parameters)
}

fn decode(resource: &TfResource) -> Result<RichParameter, ConvertError> {
    let attrs = Attrs::new(&resource.address, &resource.values);
    let options = attrs.map_blocks("option", |option| {
        Ok(RichParameterOption {
            name: option.string("name")?,
            description: option.string("description")?,
            value: option.string("value")?,
            icon: option.string("icon")?,
        })
    })?;
    let kind = attrs.string("type")?;
    let form_type = form_type(&attrs, &kind, !options.is_empty())?;

    let mut parameter = RichParameter {
        name: attrs.string("name")?,
        description: attrs.string("description")?,
        kind,
        mutable: attrs.bool("mutable")?,
        default_value: attrs.string("default")?,
        icon: attrs.string("icon")?,
        options,
        required: !attrs.bool("optional")?,
        display_name: attrs.string("display_name")?,
        order: attrs.int("order")?,
        ephemeral: attrs.bool("ephemeral")?,
        form_type,
        ..RichParameter::default()
    };

    // Only a single validation block is meaningful; the provider allows no more.
    if let [validation] = attrs.blocks("validation")?.as_slice() {
        parameter.validation_regex = validation.string("regex")?;
        parameter.validation_error = validation.string("error")?;
        parameter.validation_monotonic = validation.string("monotonic")?;
        let min: i32 = validation.int("min")?;
        let max: i32 = validation.int("max")?;
        // Providers before 0.8.2 have no *_disabled flags and required min and max together:
        // both zero meant "no range".
        let (min_disabled, max_disabled) = if validation.has("min_disabled") {
            (
                validation.bool("min_disabled")?,
                validation.bool("max_disabled")?,
            )
        } else {
            let unset = min == 0 && max == 0;
            (unset, unset)
        };
        parameter.validation_min = (!min_disabled).then_some(min);
        parameter.validation_max = (!max_disabled).then_some(max);
    }
    Ok(parameter)
}

/// The parameter's form type; when the provider predates `form_type` (or left it empty) it is the
/// one the provider would choose for the type and whether there are options.
fn form_type(
    attrs: &Attrs<'_>,
    kind: &str,
    has_options: bool,
) -> Result<ParameterFormType, ConvertError> {
    use ParameterFormType as F;
    let explicit = attrs.choice(
        "form_type",
        &[
            ("", None),
            ("default", None),
            ("error", Some(F::Error)),
            ("radio", Some(F::Radio)),
            ("dropdown", Some(F::Dropdown)),
            ("input", Some(F::Input)),
            ("textarea", Some(F::Textarea)),
            ("slider", Some(F::Slider)),
            ("checkbox", Some(F::Checkbox)),
            ("switch", Some(F::Switch)),
            ("tag-select", Some(F::TagSelect)),
            // Early provider releases spelled tag-select this way.
            ("tag-input", Some(F::TagSelect)),
            ("multi-select", Some(F::MultiSelect)),
        ],
    )?;
    Ok(explicit.unwrap_or(match (kind, has_options) {
        ("string" | "number" | "bool" | "list(string)", true) => F::Radio,
        ("string" | "number", false) => F::Input,
        ("bool", false) => F::Checkbox,
        ("list(string)", false) => F::TagSelect,
        _ => F::Default,
    }))
}

/// External auth providers, each id once (the last declaration decides `optional`), in the order
/// they first appear. `coder_git_auth` is the provider's old name for `coder_external_auth`.
pub(crate) fn external_auth(
    resources: &[TfResource],
) -> Result<Vec<ExternalAuthProviderResource>, ConvertError> {
    let mut providers: Vec<ExternalAuthProviderResource> = Vec::new();
    for resource in resources
        .iter()
        .filter(|r| r.kind == "coder_external_auth" || r.kind == "coder_git_auth")
    {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let Some(id) = attrs.opt_string("id")? else {
            return Err(ConvertError::Attribute {
                address: resource.address.clone(),
                attribute: "id".to_owned(),
                expected: "a string",
            });
        };
        let optional = attrs.bool("optional")?;
        match providers.iter_mut().find(|p| p.id == id) {
            Some(existing) => existing.optional = optional,
            None => providers.push(ExternalAuthProviderResource { id, optional }),
        }
    }
    Ok(providers)
}
