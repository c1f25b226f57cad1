// The example (swift-prometheus) is built only with the package trait `Examples`.
#if !Examples
#error("taskkit-prometheus-example needs the package trait Examples: swift run --enable-all-traits taskkit-prometheus-example")
#endif
