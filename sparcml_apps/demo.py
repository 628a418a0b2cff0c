"""The demo behind ``make demo``."""


def main():
    print("sparcml demo: the estimator is not built yet; the sparse collectives are.")
    print("Run `make test` to exercise them and")
    print("`python -m sparcml_apps.bench allreduce` to time them.")


if __name__ == "__main__":
    main()
