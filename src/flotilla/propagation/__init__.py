"""The propagation pipeline's pure decisions: binding specs, Work manifests, applying them to members."""
