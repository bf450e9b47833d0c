"""Entry point of the `fabricproof` console script (and `python -m fabricproof`)."""

from __future__ import annotations


def main() -> None:
    from .cli import app

    app()


if __name__ == "__main__":
    main()
