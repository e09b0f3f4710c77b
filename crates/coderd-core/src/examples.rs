//! The starter templates this project ships (`examples/templates`), built into the server as
//! Coder builds its own in: listed by `GET /templates/examples`, and a template version can be
//! created from one by its id (`example_id`) without uploading anything.

use codersdk::templates::TemplateExample;

/// One starter template: how it is listed, and its files.
pub struct Example {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub icon: &'static str,
    pub tags: &'static [&'static str],
    pub readme: &'static str,
    pub files: &'static [(&'static str, &'static str)],
}

macro_rules! example_file {
    ($dir:literal, $name:literal) => {
        (
            $name,
            include_str!(concat!("../../../examples/templates/", $dir, "/", $name)),
        )
    };
}

pub const EXAMPLES: &[Example] = &[
    Example {
        id: "local-process",
        name: "Local process",
        description: "A workspace on the provisioner's own host, with nothing but Terraform's \
                      built-in resources: no registry access, no cloud account.",
        icon: "/icon/terminal.svg",
        tags: &["local", "linux"],
        readme: include_str!("../../../examples/templates/local-process/README.md"),
        files: &[
            example_file!("local-process", "main.tf"),
            example_file!("local-process", "README.md"),
        ],
    },
    Example {
        id: "docker",
        name: "Docker containers",
        description: "A container per workspace with a persistent home volume.",
        icon: "/icon/docker.svg",
        tags: &["docker", "container"],
        readme: include_str!("../../../examples/templates/docker/README.md"),
        files: &[
            example_file!("docker", "main.tf"),
            example_file!("docker", "README.md"),
        ],
    },
    Example {
        id: "apps",
        name: "Web apps",
        description: "A local workspace serving a web app through the deployment's app proxy.",
        icon: "/icon/widgets.svg",
        tags: &["local", "apps"],
        readme: include_str!("../../../examples/templates/apps/README.md"),
        files: &[
            example_file!("apps", "main.tf"),
            example_file!("apps", "server.py"),
            example_file!("apps", "README.md"),
        ],
    },
    Example {
        id: "parameters-and-apps",
        name: "Parameters and apps",
        description: "A tour of what a template declares: parameters of every type, metadata, \
                      apps and scripts, with no infrastructure.",
        icon: "/icon/widgets.svg",
        tags: &["local", "parameters"],
        readme: include_str!("../../../examples/templates/parameters-and-apps/README.md"),
        files: &[
            example_file!("parameters-and-apps", "main.tf"),
            example_file!("parameters-and-apps", "README.md"),
        ],
    },
];

/// Every starter template, as the API lists them.
pub fn list() -> Vec<TemplateExample> {
    EXAMPLES
        .iter()
        .map(|e| TemplateExample {
            id: e.id.into(),
            url: String::new(),
            name: e.name.into(),
            description: e.description.into(),
            icon: e.icon.into(),
            tags: e.tags.iter().map(|t| t.to_string()).collect(),
            markdown: e.readme.into(),
        })
        .collect()
}

/// The starter template `id` as a tar archive, ready to import; `None` for an unknown id.
pub fn archive(id: &str) -> Option<Vec<u8>> {
    let example = EXAMPLES.iter().find(|e| e.id == id)?;
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content) in example.files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        // Only fails for names tar cannot hold; these are fixed at build time.
        builder
            .append_data(&mut header, name, content.as_bytes())
            .ok()?;
    }
    builder.into_inner().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_packs_and_holds_a_main_tf() {
        for example in EXAMPLES {
            let tar = archive(example.id).expect("packs");
            let mut archive = tar::Archive::new(tar.as_slice());
            let names: Vec<String> = archive
                .entries()
                .expect("entries")
                .map(|e| {
                    e.expect("entry")
                        .path()
                        .expect("path")
                        .display()
                        .to_string()
                })
                .collect();
            assert!(
                names.contains(&"main.tf".to_string()),
                "{}: {names:?}",
                example.id
            );
        }
        assert!(archive("nope").is_none());
    }
}
