// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
