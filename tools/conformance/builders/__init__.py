"""One module of conformance sources per framework, named as its adapter's module (see ``..examples``)."""
