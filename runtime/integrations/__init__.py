"""Optional integrations with agent frameworks. Each lives in its own module and needs its
own extra (``pip install 'parley[langchain]'`` for :mod:`runtime.integrations.langchain`);
importing this package needs none of them."""
