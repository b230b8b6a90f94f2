"""The Karmada API as Flotilla serves it: well-known keys (:mod:`flotilla.api.labels`) and the admission
plugins that default and validate Karmada objects (:mod:`flotilla.apiserver.webhooks`)."""
