"""Pure data: quantities, resources, specs and errors. No I/O, no logging."""
