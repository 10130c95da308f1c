#include <criterion/criterion.h>
Test(a,b){}
