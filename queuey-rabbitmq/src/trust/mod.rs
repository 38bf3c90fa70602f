//! Who may send what on the fleet plane, as RabbitMQ vouches for it.
//!
//! Control commands, heartbeats, schedule states and job results all
//! travel through the default exchange, where any user allowed to publish
//! a job may publish them too. So nothing on the fleet plane is obeyed for
//! having arrived: it is obeyed for having been sent by a user the reader
//! trusts, and RabbitMQ says who that was. It refuses a message whose
//! `user_id` property is not the user its connection logged in as (unless
//! that user has the `impersonator` tag), so a delivery's `user_id` cannot
//! be forged. The rules:
//!
//! 1. **Sign.** Every message of the fleet plane this backend publishes (a
//!    command, a sync marker, a renewed pause, a heartbeat, a schedule's
//!    state and status, a job's result) carries `user_id`: the user its
//!    connections log in as (the URI's user, or
//!    [`authenticated_user`](crate::RabbitMqOptions::authenticated_user)
//!    when a client certificate logs in). A backend that cannot tell its
//!    own user refuses to send instead of sending unsigned.
//! 2. **Commands** are obeyed only from this backend's own user and the
//!    users of [`control_senders`](crate::RabbitMqOptions::control_senders).
//! 3. **Heartbeats, schedule states, job results and renewed pauses** are
//!    accepted only from this backend's own user and the users of
//!    [`worker_senders`](crate::RabbitMqOptions::worker_senders) (a renewed
//!    pause also from a command sender): workers send them.
//! 4. A message without `user_id` is a stranger's.
//! 5. Sizes and contents are checked as well, whoever sent them (see
//!    [`ControlRecord::check`](queuey_core::control::ControlRecord::check)).
//! 6. **Tell.** Every refusal is counted and logged (`refused`).
//!
//! The default (no senders named) trusts one user: a fleet whose producers,
//! workers and operators share one credential keeps working, and gets no
//! protection from its own producers. SECURITY.md gives the permissions of
//! each role.

mod refused;

use std::collections::BTreeSet;

use lapin::BasicProperties;
use lapin::uri::SASLMechanism;
use queuey_core::Error;

use crate::RabbitMqOptions;
use crate::link::dial;
use crate::properties;
pub(crate) use refused::{Kind, Refusal, refused};

/// Who a reader trusts for what, and who this backend signs as.
#[derive(Debug, Clone, Default)]
pub(crate) struct Senders {
    /// The user this backend's connections log in as, when known.
    own: Option<String>,
    #[cfg(feature = "fleet")]
    control: BTreeSet<String>,
    workers: BTreeSet<String>,
}

/// What a message claims to be, for the sender it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A command: from a command sender.
    #[cfg(feature = "fleet")]
    Control,
    /// A heartbeat, a schedule state, a job result: from a worker.
    Worker,
    /// A renewed pause: from either.
    #[cfg(feature = "fleet")]
    Renewal,
}

impl Senders {
    /// The senders of a backend connecting to `addresses` with `options`:
    /// its own user is the first address's. Every address must log in as
    /// the same user, since the records it sends are signed with one.
    pub(crate) fn of(addresses: &[String], options: &RabbitMqOptions) -> Result<Self, Error> {
        let mut own: Option<Option<String>> = None;
        for raw in addresses {
            let address = dial::parse(raw, options)?;
            let user = if address.uri.query.auth_mechanism == Some(SASLMechanism::External) {
                options.authenticated_user.clone()
            } else {
                Some(address.uri.authority.userinfo.username.clone())
            };
            match &own {
                None => own = Some(user),
                Some(first) if *first != user => {
                    return Err(Error::invalid_config(format!(
                        "the addresses log in as different users (`{}` and `{}`): every address \
                         of one backend must use the same user, which signs what it sends to \
                         the fleet",
                        first.as_deref().unwrap_or("by certificate"),
                        user.as_deref().unwrap_or("by certificate"),
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(Senders {
            own: own.flatten(),
            #[cfg(feature = "fleet")]
            control: options.control_senders.iter().cloned().collect(),
            workers: options.worker_senders.iter().cloned().collect(),
        })
    }

    /// The user this backend signs as, if known.
    #[cfg(any(feature = "fleet", test))]
    pub(crate) fn own(&self) -> Option<&str> {
        self.own.as_deref()
    }

    /// `properties` with this backend's user as `user_id`; an error when
    /// the backend cannot tell its user (a certificate login without
    /// [`authenticated_user`](crate::RabbitMqOptions::authenticated_user)).
    pub(crate) fn sign(
        &self,
        properties: BasicProperties,
        what: &str,
    ) -> Result<BasicProperties, Error> {
        match &self.own {
            Some(user) => Ok(properties.with_user_id(properties::short(user))),
            None => Err(Error::invalid_config(format!(
                "{what}: this backend logs in with a client certificate, so it cannot tell \
                 which RabbitMQ user it is, and the fleet obeys only signed messages; set \
                 `RabbitMqOptions::authenticated_user` to the user RabbitMQ maps the \
                 certificate to"
            ))),
        }
    }

    /// `properties` signed when the user is known, as they are otherwise
    /// (for messages whose readers do not need to know the sender, such as
    /// a sync marker matched by its nonce).
    #[cfg(any(feature = "fleet", test))]
    pub(crate) fn sign_if_known(&self, properties: BasicProperties) -> BasicProperties {
        match &self.own {
            Some(user) => properties.with_user_id(properties::short(user)),
            None => properties,
        }
    }

    /// Whether a delivery with `properties` comes from a user trusted for
    /// `role`.
    pub(crate) fn admit(&self, role: Role, properties: &BasicProperties) -> Result<(), Refusal> {
        let Some(user) = properties.user_id().as_ref().map(|u| u.as_str()) else {
            return Err(Refusal::Unsigned);
        };
        let trusted = self.own.as_deref() == Some(user)
            || match role {
                #[cfg(feature = "fleet")]
                Role::Control => self.control.contains(user),
                Role::Worker => self.workers.contains(user),
                #[cfg(feature = "fleet")]
                Role::Renewal => self.control.contains(user) || self.workers.contains(user),
            };
        trusted
            .then_some(())
            .ok_or_else(|| Refusal::Stranger(user.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn senders(options: RabbitMqOptions) -> Senders {
        Senders::of(&["amqp://app:pw@localhost:5672/%2f".to_owned()], &options).unwrap()
    }

    fn from(user: &str) -> BasicProperties {
        BasicProperties::default().with_user_id(user.into())
    }

    #[test]
    fn by_default_only_the_own_user_is_trusted() {
        let s = senders(RabbitMqOptions::default());
        assert_eq!(s.own(), Some("app"));
        let roles = [Role::Worker].into_iter();
        #[cfg(feature = "fleet")]
        let roles = roles.chain([Role::Control, Role::Renewal]);
        for role in roles {
            assert_eq!(s.admit(role, &from("app")), Ok(()));
            assert_eq!(
                s.admit(role, &from("intruder")),
                Err(Refusal::Stranger("intruder".into()))
            );
            assert_eq!(
                s.admit(role, &BasicProperties::default()),
                Err(Refusal::Unsigned)
            );
        }
        let signed = s.sign(BasicProperties::default(), "x").unwrap();
        assert_eq!(signed.user_id().as_ref().map(|u| u.as_str()), Some("app"));
    }

    #[cfg(feature = "fleet")]
    #[test]
    fn named_senders_are_trusted_for_their_role_only() {
        let s = senders(
            RabbitMqOptions::default()
                .control_senders(["ops"])
                .worker_senders(["worker"]),
        );
        assert_eq!(s.admit(Role::Control, &from("ops")), Ok(()));
        assert!(s.admit(Role::Control, &from("worker")).is_err());
        assert_eq!(s.admit(Role::Worker, &from("worker")), Ok(()));
        assert!(s.admit(Role::Worker, &from("ops")).is_err());
        assert_eq!(s.admit(Role::Renewal, &from("ops")), Ok(()));
        assert_eq!(s.admit(Role::Renewal, &from("worker")), Ok(()));
    }

    #[test]
    fn a_certificate_login_signs_only_as_the_user_it_is_told() {
        let external = |options: RabbitMqOptions| Senders {
            own: options.authenticated_user.clone(),
            ..Senders::default()
        };
        let unknown = external(RabbitMqOptions::default());
        let error = unknown
            .sign(BasicProperties::default(), "sending a command")
            .unwrap_err();
        assert!(error.to_string().contains("authenticated_user"), "{error}");
        assert!(
            unknown
                .sign_if_known(BasicProperties::default())
                .user_id()
                .is_none()
        );
        let known = external(RabbitMqOptions::default().authenticated_user("CN=worker"));
        assert_eq!(known.own(), Some("CN=worker"));
    }

    #[test]
    fn addresses_with_different_users_are_refused() {
        let addresses = [
            "amqp://a:pw@h1:5672/%2f".to_owned(),
            "amqp://b:pw@h2:5672/%2f".to_owned(),
        ];
        let error = Senders::of(&addresses, &RabbitMqOptions::default()).unwrap_err();
        assert!(error.to_string().contains("different users"), "{error}");
        // No user in the URI is RabbitMQ's default one.
        let plain = Senders::of(
            &["amqp://localhost:5672/%2f".to_owned()],
            &RabbitMqOptions::default(),
        )
        .unwrap();
        assert_eq!(plain.own(), Some("guest"));
    }
}
